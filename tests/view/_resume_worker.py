"""Worker process of the SQLite resume test: runs the scenario of ``test_resume_view``
and SIGKILLs itself inside the model call of turn KILL_AT (that view record is lost).

Usage: python _resume_worker.py STORE_URL RUN_ID KILL_AT
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import test_resume_view as scenario

from lovia import Runner
from lovia.providers.base import ModelRequest
from lovia.stores import store
from lovia.testing import FunctionModel
from lovia.testing._models import CallInfo

STORE_URL, RUN_ID, KILL_AT = sys.argv[1], sys.argv[2], int(sys.argv[3])


def decide(request: ModelRequest, info: CallInfo) -> Any:
    step = scenario.decide(request)
    if not scenario.is_summary(request) and f'"n": {KILL_AT}}}' in str(step):
        os.kill(os.getpid(), signal.SIGKILL)
    return step


async def main() -> None:
    db = store(STORE_URL)
    model = FunctionModel(decide, profile=scenario.model().profile)
    await Runner.run(scenario.agent(model), "go", run_id=RUN_ID, checkpointer=db)
    await db.aclose()


asyncio.run(main())
