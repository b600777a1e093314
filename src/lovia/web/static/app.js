// lovia web: a little vanilla JavaScript. Stored strings only ever reach the page
// through textContent (never innerHTML), so hostile transcripts stay inert.
"use strict";
(function () {
  const csrf = document.querySelector('meta[name="lovia-csrf"]').content;

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function post(url, body) {
    return fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "x-lovia-csrf": csrf },
      body: JSON.stringify(body),
      credentials: "same-origin",
    });
  }

  async function failure(resp) {
    try {
      const data = await resp.json();
      return data.error + (data.hint ? " (" + data.hint + ")" : "");
    } catch (e) {
      return "HTTP " + resp.status;
    }
  }

  // Runs in flight: refresh the page while something is still running.
  const refresh = document.body.dataset.refresh;
  if (refresh) setTimeout(() => location.reload(), Number(refresh) * 1000);

  // Approvals pending in a paused run: approve or deny from the run page.
  document.querySelectorAll("button.approve, button.deny").forEach((button) => {
    button.addEventListener("click", async () => {
      const out = document.getElementById("approval-result");
      const decisions = {};
      decisions[button.dataset.call] = button.dataset.decision === "approve";
      document.querySelectorAll("button.approve, button.deny").forEach((b) => (b.disabled = true));
      out.textContent = "resuming the run…";
      const resp = await post("/api/runs/" + encodeURIComponent(button.dataset.run) + "/approvals", { decisions });
      if (!resp.ok) { out.textContent = await failure(resp); return; }
      const data = await resp.json();
      out.textContent = "run " + data.status + (data.error ? ": " + data.error : "");
      setTimeout(() => location.reload(), 300);
    });
  });

  // Pin: write this run as an evaluation case (the same folder as `lovia pin RUN`).
  const pin = document.getElementById("pin-run");
  if (pin) {
    pin.addEventListener("click", async () => {
      const out = document.getElementById("pin-result");
      pin.disabled = true;
      out.textContent = "pinning…";
      const resp = await post("/api/runs/" + encodeURIComponent(pin.dataset.run) + "/pin", {});
      pin.disabled = false;
      if (!resp.ok) { out.textContent = await failure(resp); return; }
      const data = await resp.json();
      out.textContent = "pinned " + data.views + " views to " + data.path + " (lovia eval " + data.path + " --baseline)";
    });
  }

  // An interrupted run: resume it from its checkpoint (lovia web --agent).
  document.querySelectorAll("button.resume").forEach((button) => {
    button.addEventListener("click", async () => {
      const out = document.getElementById("resume-result");
      button.disabled = true;
      out.textContent = "resuming the run…";
      const resp = await post("/api/runs/" + encodeURIComponent(button.dataset.run) + "/resume", {});
      if (!resp.ok) { out.textContent = await failure(resp); button.disabled = false; return; }
      const data = await resp.json();
      out.textContent = "run " + data.status + (data.error ? ": " + data.error : "");
      setTimeout(() => location.reload(), 300);
    });
  });

  // What-if: send this view to another model; the answer goes beside the recorded one.
  const whatif = document.getElementById("whatif-form");
  if (whatif) {
    whatif.addEventListener("submit", async (event) => {
      event.preventDefault();
      const out = document.getElementById("whatif-result");
      const form = new FormData(whatif);
      out.replaceChildren(el("span", "dim", "sending…"));
      const url = "/api/runs/" + encodeURIComponent(whatif.dataset.run) + "/turns/" + whatif.dataset.turn + "/whatif";
      const resp = await post(url, { model: form.get("model"), base_url: form.get("base_url") || null, api_key: form.get("api_key") || null, attempt: Number(whatif.dataset.attempt) });
      if (!resp.ok) { out.replaceChildren(el("span", "err-type", await failure(resp))); return; }
      const data = await resp.json();
      const nodes = data.rerun.entries.map((e) => {
        const item = el("div", "item");
        item.append(el("span", "label", e.type), el("pre", "text", e.text));
        return item;
      });
      nodes.push(el("p", "dim", data.rerun.model + " · finish " + data.rerun.finish_reason + " · " +
        data.rerun.usage.input_tokens + "+" + data.rerun.usage.output_tokens + " tokens"));
      out.replaceChildren(...nodes);
    });
  }

  // The provider request body repeats the whole view: fetched when asked for.
  const loadBody = document.getElementById("load-body");
  if (loadBody) {
    loadBody.addEventListener("click", async () => {
      const out = document.getElementById("body-json");
      const resp = await fetch(loadBody.dataset.url, { credentials: "same-origin" });
      out.textContent = resp.ok ? JSON.stringify(await resp.json(), null, 2) : await failure(resp);
      out.hidden = false;
      loadBody.hidden = true;
    });
  }

  // Chat with the --agent: events stream in as NDJSON lines.
  const chat = document.getElementById("chat-form");
  if (chat) {
    const log = document.getElementById("chat-log");
    chat.addEventListener("submit", async (event) => {
      event.preventDefault();
      const input = chat.querySelector("textarea");
      const message = input.value.trim();
      if (!message) return;
      input.value = "";
      log.append(el("div", "msg user", message));
      const answer = el("div", "msg assistant");
      log.append(answer);
      const resp = await post("/api/chat", { message, session_id: chat.dataset.session });
      if (!resp.ok || !resp.body) { answer.append(el("div", "error", await failure(resp))); return; }
      const reader = resp.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      let text = null;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let nl;
        while ((nl = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          if (!line) continue;
          const ev = JSON.parse(line);
          if (ev.type === "text") {
            if (!text) { text = el("span", "text"); answer.append(text); }
            text.textContent += ev.text;
          } else if (ev.type === "tool_call") {
            text = null;
            answer.append(el("div", "tool tool-call", "→ " + ev.name + "(" + ev.arguments + ")"));
          } else if (ev.type === "tool_result") {
            answer.append(el("div", "tool tool-result", (ev.is_error ? "error: " : "← ") + ev.content));
          } else if (ev.type === "done" || ev.type === "error") {
            if (ev.type === "error") answer.append(el("div", "error", ev.error + (ev.hint ? " (" + ev.hint + ")" : "")));
            const link = el("a", "run-link", "run " + ev.run_id);
            link.href = "/runs/" + encodeURIComponent(ev.run_id);
            const p = el("div", "dim");
            p.append(link);
            answer.append(p);
          }
        }
      }
    });
  }
})();
