// lovia web: a little vanilla JavaScript. Stored strings only ever reach the page
// through textContent (never innerHTML), so hostile transcripts stay inert; parts of
// a page fetched again are parsed with DOMParser (scripts never run) and moved in.
"use strict";
(function () {
  const csrf = document.querySelector('meta[name="lovia-csrf"]').content;
  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function link(href, text, cls) {
    const a = el("a", cls, text);
    a.href = href;
    return a;
  }

  function post(url, body) {
    return fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "x-lovia-csrf": csrf },
      body: JSON.stringify(body),
      credentials: "same-origin",
    });
  }

  async function getJSON(url) {
    const resp = await fetch(url, { credentials: "same-origin" });
    if (!resp.ok) throw new Error(await failure(resp));
    return resp.json();
  }

  async function failure(resp) {
    try {
      const data = await resp.json();
      return data.error + (data.hint ? " (" + data.hint + ")" : "");
    } catch (e) {
      return "HTTP " + resp.status;
    }
  }

  // -- live in place: swap the changed parts of the page, never reload it -------------
  async function swapParts(ids) {
    const resp = await fetch(location.href, { credentials: "same-origin" });
    if (!resp.ok) return null;
    const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
    const panel = document.getElementById("span-panel");
    ids.forEach((id) => {
      if (id === "trace" && panel && !panel.hidden) return; // keep the span being read
      const now = document.getElementById(id);
      const fresh = doc.getElementById(id);
      if (!now || !fresh) return;
      const node = document.adoptNode(fresh);
      now.replaceWith(node);
      wire(node);
    });
    return doc;
  }

  const liveUrl = document.body.dataset.liveUrl;
  if (liveUrl) {
    let version = null;
    const tick = async () => {
      let data;
      try { data = await getJSON(liveUrl); } catch (e) { setTimeout(tick, 5000); return; }
      if (version !== null && data.version !== version) await swapParts(["run-head", "transcript", "trace"]);
      version = data.version;
      if (data.live) { setTimeout(tick, 2000); return; }
      await swapParts(["run-head", "transcript", "trace"]);
      const note = document.getElementById("live-note");
      if (note) note.textContent = data.orphaned
        ? "interrupted: " + (data.detail || "its worker is gone") + "; updates stopped"
        : "run " + data.status + "; updates stopped";
      const badge = document.getElementById("run-status");
      if (badge && data.orphaned) { badge.textContent = "interrupted"; badge.className = "badge status-interrupted"; }
    };
    setTimeout(tick, 2000);
  }

  const results = document.getElementById("results");
  if (results && results.dataset.live === "on") {
    const tick = async () => {
      await swapParts(["results"]);
      const now = document.getElementById("results");
      if (now && now.dataset.live === "on") setTimeout(tick, 3000);
    };
    setTimeout(tick, 3000);
  }

  // -- back to the list page the run was opened from (the page sends no Referer) ------
  const store = (k, v) => { try { if (v === undefined) return sessionStorage.getItem(k); sessionStorage.setItem(k, v); } catch (e) { /* private mode */ } return null; };
  if (location.pathname === "/") store("lovia-list", location.pathname + location.search);
  const backToList = document.getElementById("back-to-list");
  const listUrl = store("lovia-list");
  if (backToList && listUrl && /^\/\?[^/]*$/.test(listUrl)) backToList.href = listUrl;

  // -- runs list: clean shareable URLs (no empty parameters) ---------------------------
  const filters = document.getElementById("filters");
  if (filters) {
    filters.addEventListener("submit", () => {
      const range = filters.elements.namedItem("range");
      $$("input, select", filters).forEach((field) => {
        const ranged = range && range.value && (field.name === "since" || field.name === "until");
        if (field.name === "sort" && field.value === "time") field.disabled = true;
        else if ((field.type !== "checkbox" && !field.value) || ranged) field.disabled = true;
      });
    });
  }

  // -- the trace: collapse, bookkeeping rows, span panel, zoom -------------------------
  function rowsBelow(row) {
    const depth = Number(row.dataset.depth);
    const out = [];
    for (let next = row.nextElementSibling; next; next = next.nextElementSibling) {
      if (Number(next.dataset.depth) <= depth) break;
      out.push(next);
    }
    return out;
  }

  function showBookkeeping() {
    const box = document.getElementById("show-bookkeeping");
    return box ? box.checked : false;
  }

  function refreshRows() {
    const collapsed = new Set();
    $$("#waterfall tr.span").forEach((row) => {
      let hidden = row.classList.contains("bookkeeping") && !showBookkeeping();
      if (collapsed.has(row.dataset.parentId)) { hidden = true; collapsed.add(row.dataset.spanId); }
      const toggle = $(".toggle", row);
      if (toggle && toggle.getAttribute("aria-expanded") === "false") collapsed.add(row.dataset.spanId);
      row.hidden = hidden;
    });
  }

  let zoom = null;
  let shown = null; // the time range the bars are drawn on now
  function drawZoom() {
    const rows = $$("#waterfall tr.span");
    if (!rows.length) return;
    let t0 = Infinity, t1 = -Infinity;
    rows.forEach((r) => { t0 = Math.min(t0, Number(r.dataset.start)); t1 = Math.max(t1, Number(r.dataset.end)); });
    if (zoom) { t0 = zoom[0]; t1 = zoom[1]; }
    shown = [t0, t1];
    const scale = 1000 / Math.max(1e-6, t1 - t0);
    rows.forEach((r) => {
      const rect = $("rect", r);
      const s = Math.min(Math.max(Number(r.dataset.start), t0), t1);
      const e = Math.min(Math.max(Number(r.dataset.end), s), t1);
      const left = (s - t0) * scale;
      rect.setAttribute("x", left.toFixed(1));
      rect.setAttribute("width", Math.min(Math.max(2, (e - s) * scale), 1000 - left).toFixed(1));
    });
    $$("#ticks span").forEach((tick, i, all) => {
      const secs = ((t1 - t0) * i) / Math.max(1, all.length - 1);
      tick.textContent = secs < 1 ? Math.round(secs * 1000) + "ms" : secs.toFixed(2) + "s";
    });
    const reset = document.getElementById("zoom-reset");
    if (reset) reset.hidden = !zoom;
    const note = document.getElementById("zoom-note");
    if (note) note.textContent = zoom ? "zoomed to " + ((t1 - t0) * 1000).toFixed(0) + " ms" : "";
  }

  function kv(table, key, value) {
    if (value === undefined || value === null || value === "") return;
    const tr = el("tr");
    const th = el("th", null, key);
    th.scope = "row";
    const td = el("td", "mono", typeof value === "object" ? JSON.stringify(value) : value);
    tr.append(th, td);
    table.append(tr);
  }

  async function openSpan(row) {
    const panel = document.getElementById("span-panel");
    if (!panel) return;
    $$("#waterfall tr.selected").forEach((r) => r.classList.remove("selected"));
    row.classList.add("selected");
    panel.hidden = false;
    panel.replaceChildren(el("p", "dim", "loading…"));
    let data;
    const url = "/api/runs/" + encodeURIComponent(panel.dataset.run) + "/spans/" + encodeURIComponent(row.dataset.spanId);
    try { data = await getJSON(url); } catch (e) { panel.replaceChildren(el("p", "err-type", e.message)); return; }
    const close = el("button", "close", "close");
    close.type = "button";
    close.addEventListener("click", () => { panel.hidden = true; row.classList.remove("selected"); });
    const zoomIn = el("button", null, "zoom to this span");
    zoomIn.type = "button";
    zoomIn.addEventListener("click", () => { zoom = [data.start, data.start + Math.max(data.duration_s || 0, 1e-3)]; drawZoom(); });
    const head = el("h3", null, data.label);
    const facts = el("table", "facts");
    kv(facts, "span id", data.span_id);
    kv(facts, "trace id", data.trace_id);
    kv(facts, "traceparent", data.traceparent);
    kv(facts, "duration", data.duration_s === null ? "-" : (data.duration_s * 1000).toFixed(1) + " ms");
    kv(facts, "turn", data.turn);
    kv(facts, "purpose", data.purpose);
    kv(facts, "input tokens", data.input_tokens);
    kv(facts, "output tokens", data.output_tokens);
    kv(facts, "cost (USD)", data.cost_usd);
    kv(facts, "error", data.error);
    const links = el("p", "links");
    if (data.view_url) links.append(link(data.view_url, "the view of turn " + data.turn), " ");
    if (data.call_url) links.append(link(data.call_url, "its tool call"), " ");
    if (data.link) { const out = link(data.link, "open in Jaeger/Grafana"); out.rel = "noreferrer noopener"; out.target = "_blank"; links.append(out); }
    const attrs = el("table", "facts attrs");
    Object.keys(data.attributes || {}).sort().forEach((k) => kv(attrs, k, data.attributes[k]));
    const events = el("ul", "events");
    (data.events || []).forEach((e) => events.append(el("li", "mono", (e.name || "?") + " " + JSON.stringify(e.attributes || {}))));
    panel.replaceChildren(close, head, facts, links, zoomIn, el("h4", null, "attributes"), attrs,
      el("h4", null, "events (" + (data.events || []).length + ")"), events);
  }

  function wireTrace(root) {
    $$("#waterfall .toggle", root).forEach((button) => {
      button.addEventListener("click", () => {
        const open = button.getAttribute("aria-expanded") !== "false";
        button.setAttribute("aria-expanded", open ? "false" : "true");
        button.textContent = open ? "▸" : "▾";
        refreshRows();
      });
    });
    $$("#waterfall .span-open", root).forEach((button) => {
      button.addEventListener("click", () => openSpan(button.closest("tr")));
    });
    const box = $("#show-bookkeeping", root);
    if (box) box.addEventListener("change", refreshRows);
    const reset = $("#zoom-reset", root);
    if (reset) reset.addEventListener("click", () => { zoom = null; drawZoom(); });
    // drag across the time axis to zoom to that range
    const axisCell = $("th.axis", root);
    if (axisCell) {
      let from = null;
      const at = (event) => {
        const box = axisCell.getBoundingClientRect();
        return Math.min(1, Math.max(0, (event.clientX - box.left) / Math.max(1, box.width)));
      };
      axisCell.addEventListener("pointerdown", (event) => { from = at(event); event.preventDefault(); });
      axisCell.addEventListener("pointerup", (event) => {
        if (from === null) return;
        const to = at(event);
        if (!shown) drawZoom();
        if (shown && Math.abs(to - from) > 0.01) {
          const span = shown[1] - shown[0];
          zoom = [shown[0] + Math.min(from, to) * span, shown[0] + Math.max(from, to) * span];
          drawZoom();
        }
        from = null;
      });
    }
    if (zoom) drawZoom();
    // the minimap: every row of a long trace at once; a click goes to the row there
    const map = $("#minimap", root);
    if (map) {
      const marks = $$("rect", map);
      map.addEventListener("click", (event) => {
        const box = map.getBoundingClientRect();
        const at = Math.min(0.999, Math.max(0, (event.clientY - box.top) / Math.max(1, box.height)));
        const mark = event.target.closest("rect") || marks[Math.floor(at * marks.length)];
        const row = mark && $$("#waterfall tr.span").find((r) => r.dataset.spanId === mark.dataset.spanId);
        if (!row) return;
        if (row.hidden) { row.hidden = false; }
        $$("#waterfall tr.selected").forEach((r) => r.classList.remove("selected"));
        row.classList.add("selected");
        row.scrollIntoView({ block: "center" });
      });
    }
  }

  // -- long texts: the rest on demand --------------------------------------------------
  function wireMore(root) {
    const runId = (document.getElementById("run-id") || {}).textContent;
    $$("button.more", root).forEach((button) => {
      button.addEventListener("click", async () => {
        const url = "/api/runs/" + encodeURIComponent(runId) + "/entries/" + encodeURIComponent(button.dataset.entry);
        try {
          const data = await getJSON(url);
          button.previousElementSibling.textContent = data.content !== undefined && data.type === "tool_result" ? data.content : data.text;
          button.remove();
        } catch (e) { button.textContent = e.message; }
      });
    });
  }

  function wire(root) {
    wireTrace(root);
    wireMore(root);
    wireApprovals(root);
    refreshRows();
  }

  // -- view page: earlier messages, whole messages, turn picker ------------------------
  const messages = document.getElementById("messages");
  function messageNode(m) {
    const item = el("details", "item msg kind-" + m.type + (m.how ? " how-" + m.how : ""));
    item.open = true;
    item.dataset.index = m.index;
    const summary = el("summary");
    summary.append(el("span", "label", m.role));
    if (m.how) summary.append(" ", el("span", "tag", m.how));
    summary.append(" ", el("span", "dim small", "#" + m.index));
    item.append(summary, el("pre", "text", m.text));
    if (m.text.length < m.chars) item.append(moreButton(m.index, m.chars));
    return item;
  }
  function moreButton(index, chars) {
    const b = el("button", "more-msg", "show all (" + chars + " characters)");
    b.type = "button";
    b.dataset.index = index;
    b.addEventListener("click", () => showWhole(b));
    return b;
  }
  async function showWhole(button) {
    const url = messages.dataset.url + "&start=" + button.dataset.index + "&count=1&full=1";
    try {
      const data = await getJSON(url);
      button.parentElement.querySelector("pre").textContent = data.messages[0].text;
      button.remove();
    } catch (e) { button.textContent = e.message; }
  }
  if (messages) {
    $$("button.more-msg", messages).forEach((b) => b.addEventListener("click", () => showWhole(b)));
    const earlier = document.getElementById("earlier");
    if (earlier) {
      earlier.addEventListener("click", async () => {
        const end = Number(earlier.dataset.end);
        const start = Math.max(0, end - 100);
        const data = await getJSON(messages.dataset.url + "&start=" + start + "&count=" + (end - start));
        document.getElementById("message-list").prepend(...data.messages.map(messageNode));
        earlier.dataset.end = start;
        if (start === 0) earlier.remove();
        else earlier.textContent = "show " + start + " earlier messages";
      });
    }
  }
  const picker = document.getElementById("turn-picker");
  if (picker) {
    picker.addEventListener("submit", (event) => {
      event.preventDefault();
      const turn = picker.elements.namedItem("turn").value;
      if (turn !== "") location.href = picker.dataset.base + encodeURIComponent(turn);
    });
  }

  // -- approvals: decide from the run page, then update in place -----------------------
  function wireApprovals(root) {
    // one POST on a run from its button, its answer said in `outId`, then the page updated
    function runAction(selector, action, outId, busy, said, parts) {
      $$(selector, root).forEach((button) => {
        button.addEventListener("click", async () => {
          const out = document.getElementById(outId);
          button.disabled = true;
          out.textContent = busy;
          const resp = await post("/api/runs/" + encodeURIComponent(button.dataset.run) + "/" + action, {});
          if (!resp.ok) { out.textContent = await failure(resp); button.disabled = false; return; }
          out.textContent = said(await resp.json());
          await swapParts(parts);
        });
      });
    }
    // an interrupted run: resume it from its checkpoint (lovia web --agent)
    runAction("button.resume", "resume", "resume-result", "resuming the run…",
      (data) => "run " + data.status + (data.error ? ": " + data.error : ""),
      ["run-head", "transcript", "trace"]);
    // a running (or interrupted, paused) run: store a cancel request (lovia cancel)
    runAction("button.cancel-run", "cancel", "cancel-result", "asking its worker to stop it…",
      (data) => data.said, ["run-head"]);
    $$("button.approve, button.deny", root).forEach((button) => {
      button.addEventListener("click", async () => {
        const out = document.getElementById("approval-result");
        const decisions = {};
        decisions[button.dataset.call] = button.dataset.decision === "approve";
        $$("button.approve, button.deny").forEach((b) => (b.disabled = true));
        out.textContent = "resuming the run…";
        const resp = await post("/api/runs/" + encodeURIComponent(button.dataset.run) + "/approvals", { decisions });
        if (!resp.ok) { out.textContent = await failure(resp); return; }
        const data = await resp.json();
        out.textContent = "run " + data.status + (data.error ? ": " + data.error : "");
        await swapParts(["run-head", "transcript", "trace"]);
      });
    });
  }

  // -- pin: write this run as an evaluation case (the same folder as `lovia pin RUN`) -
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

  // -- what-if: send this view to another model; the answer goes beside the recorded one
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

  // -- chat with the --agent: events stream in as NDJSON lines ------------------------
  const chat = document.getElementById("chat-form");
  if (chat) {
    const log = document.getElementById("chat-log");
    const key = "lovia-chat-session:" + chat.dataset.agent;
    let session = null;
    try { session = localStorage.getItem(key); } catch (e) { session = null; }
    if (!session || !/^[A-Za-z0-9_.:-]{1,128}$/.test(session)) {
      session = chat.dataset.session;
      try { localStorage.setItem(key, session); } catch (e) { /* private mode */ }
    }
    document.getElementById("chat-session").textContent = session;
    const newSession = document.getElementById("chat-new");
    if (newSession) newSession.addEventListener("click", () => {
      try { localStorage.removeItem(key); } catch (e) { /* private mode */ }
      location.reload();
    });
    (async () => {
      try {
        const data = await getJSON("/api/chat/history?session_id=" + encodeURIComponent(session));
        data.messages.forEach((m) => log.append(el("div", "msg " + (m.role === "user" ? "user" : "assistant"), m.text)));
      } catch (e) { /* a new session has no history */ }
    })();
    const input = chat.querySelector("textarea");
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        chat.requestSubmit();
      }
    });
    const runLink = (runId) => {
      const p = el("div", "dim");
      p.append(link("/runs/" + encodeURIComponent(runId), "run " + runId, "run-link"));
      return p;
    };
    const paused = (answer, ev) => {
      const box = el("div", "chat-approval");
      box.append(el("p", "waiting", "waiting for your approval:"));
      ev.calls.forEach((c) => {
        const row = el("div", "pending");
        row.append(el("span", "mono", c.name + "(" + c.arguments + ")"));
        ["approve", "deny"].forEach((decision) => {
          const b = el("button", decision, decision);
          b.type = "button";
          b.addEventListener("click", async () => {
            $$("button", box).forEach((x) => (x.disabled = true));
            const decisions = {};
            decisions[c.call_id] = decision === "approve";
            const resp = await post("/api/runs/" + encodeURIComponent(ev.run_id) + "/approvals", { decisions });
            const data = resp.ok ? await resp.json() : { status: "failed", error: await failure(resp) };
            box.append(el("div", data.status === "failed" ? "error" : "text",
              data.status === "completed" ? data.output : "run " + data.status + (data.error ? ": " + data.error : "")));
          });
          row.append(" ", b);
        });
        box.append(row);
      });
      answer.append(box, runLink(ev.run_id));
    };
    chat.addEventListener("submit", async (event) => {
      event.preventDefault();
      const message = input.value.trim();
      if (!message) return;
      input.value = "";
      log.append(el("div", "msg user", message));
      const answer = el("div", "msg assistant");
      log.append(answer);
      const resp = await post("/api/chat", { message, session_id: session });
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
          } else if (ev.type === "paused") {
            paused(answer, ev);
          } else if (ev.type === "done" || ev.type === "error") {
            if (ev.type === "error") answer.append(el("div", "error", ev.error + (ev.hint ? " (" + ev.hint + ")" : "")));
            answer.append(runLink(ev.run_id));
          }
        }
      }
    });
  }

  // -- keyboard: ? / j k u b Enter Esc --------------------------------------------------
  const help = document.getElementById("help");
  const helpButton = document.getElementById("help-button");
  if (helpButton && help) helpButton.addEventListener("click", () => help.showModal());
  let cursor = -1;
  function moveRow(step) {
    const rows = $$("table.runs tr.run");
    if (!rows.length) return;
    rows.forEach((r) => r.classList.remove("selected"));
    cursor = Math.min(rows.length - 1, Math.max(0, cursor + step));
    rows[cursor].classList.add("selected");
    const a = $("a.run-link", rows[cursor]);
    if (a) a.focus();
  }
  document.addEventListener("keydown", (event) => {
    const target = event.target;
    const typing = target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
    if (typing || event.ctrlKey || event.metaKey || event.altKey) return;
    const body = document.body.dataset;
    if (event.key === "?") { event.preventDefault(); if (help && !help.open) help.showModal(); }
    else if (event.key === "/") { const s = document.getElementById("search"); if (s) { event.preventDefault(); s.focus(); } }
    else if (event.key === "j" || event.key === "k") {
      const turn = event.key === "j" ? body.next : body.prev;
      if (turn !== undefined) { if (turn !== "") location.href = location.pathname.replace(/\/turns\/\d+$/, "/turns/" + turn); }
      else moveRow(event.key === "j" ? 1 : -1);
    } else if (event.key === "u") {
      if (body.up) location.href = body.up;
      else { const back = document.getElementById("back-to-list"); if (back) location.href = back.href; }
    } else if (event.key === "b") {
      const box = document.getElementById("show-bookkeeping");
      if (box) { box.checked = !box.checked; refreshRows(); }
    } else if (event.key === "Escape") {
      const panel = document.getElementById("span-panel");
      if (panel && !panel.hidden) panel.hidden = true;
      else if (zoom) { zoom = null; drawZoom(); }
    }
  });

  wire(document);
})();
