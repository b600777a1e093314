"""Who spends what: attribution labels, a spend limit shared by every run, and reprice.

Offline, with a SQLite store in a temporary folder and a scripted model priced by an
override. Runs are labelled with their tenant; a daily limit of $0.50 for tenant
``acme`` is counted in the store, so it holds across runs (and would across processes
and workers on the same store). The fourth ``acme`` run stops before its model call with
``SpendLimitExceeded``; ``globex`` is not limited. Then the price changes and
``lovia reprice`` recomputes the stored runs' cost from their per-call usage.

Run: python examples/45_spend_limits.py
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import lovia
from lovia import Agent, Runner, SpendLimit, SpendLimitExceeded, Usage
from lovia.stores import store
from lovia.testing import FunctionModel, reply

PRICES = "- {provider: test, model: support-model, input_per_mtok: 1000, output_per_mtok: 1000}\n"
NEW_PRICES = "- {provider: test, model: support-model, input_per_mtok: 500, output_per_mtok: 500}\n"


def support_agent() -> Agent[Any, str]:
    """Every call: 100 tokens in, 100 out: $0.20 at the first prices."""
    model = FunctionModel(
        lambda request, info: reply("done", usage=Usage(input_tokens=100, output_tokens=100)),
        model="support-model",
    )
    return Agent(name="support", model=model)


async def main(folder: Path) -> str:
    (folder / "prices.yaml").write_text(PRICES)
    lovia.load_prices(folder / "prices.yaml")
    url = f"sqlite:///{folder / 'lovia.db'}"
    lovia.configure(
        spend_limits=[SpendLimit(label="tenant", value="acme", max_usd=0.5, window="day")]
    )
    db = store(url)
    settings = lovia.ModelSettings(max_tokens=200)  # the estimate each call reserves
    try:
        for n, tenant in enumerate(["acme", "acme", "globex", "acme", "acme"], 1):
            labels = {"tenant": tenant, "feature": "chat"}
            try:
                await Runner.run(
                    support_agent(), "help", store=db, labels=labels, settings=settings
                )
                print(f"run {n} for {tenant}: ok")
            except SpendLimitExceeded as exc:
                print(f"run {n} for {tenant}: stopped: {exc.message.split(': ', 1)[1]}")
        acme = await db.list_runs(labels={"tenant": "acme"}, status="completed")
        print(f"acme completed runs: {len(acme)}, cost ${sum(r.cost_usd for r in acme):.2f}")
    finally:
        await db.aclose()
    return url


def lovia_cli(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "lovia.cli", *args], capture_output=True, text=True, env=env
    )
    return done.stdout + done.stderr


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        url = asyncio.run(main(folder))
        (folder / "new.yaml").write_text(NEW_PRICES)
        env = {**os.environ, "LOVIA_PRICES": str(folder / "new.yaml"), "NO_COLOR": "1"}
        print(lovia_cli("runs", "--label", "tenant=acme", "--store", url, env=env).splitlines()[-1])
        out = lovia_cli("reprice", "--all", "--store", url, env=env)
        print(out.splitlines()[-1])
