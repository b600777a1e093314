"""Test your agents without a real model.

- :class:`ScriptedModel` — a strict script of replies: fails on an unexpected extra call,
  reports unconsumed steps, records every request it got.
- :class:`FunctionModel` — a function decides each reply from the request.
- :class:`AutoModel` — no script: calls every tool with arguments valid for its schema,
  then answers with a valid output. ``with agent.override(model=AutoModel()):`` swaps it
  in for an agent inside a test.
- :func:`capture_events` — every event of every run while a block is open.
- ``lovia.testing.pytest_plugin`` — fails a test whose ScriptedModel steps were not all used.
- :func:`block_network` — makes any real (non-loopback) HTTP request fail, so a test
  can never call a paid API by accident.

Steps are plain values: a ``str`` (text answer), ``call(name, **args)`` (one tool call),
a list of calls (parallel calls), ``reply(...)`` (text + calls + reasoning + usage), or
an exception instance (the call fails with it).
"""

from ._auto import AutoModel, example_value
from ._capture import capture_events
from ._models import (
    FunctionModel,
    Reply,
    ScriptedModel,
    ScriptError,
    Step,
    ToolCallSpec,
    call,
    reply,
)
from ._network import NetworkBlocked, block_network

__all__ = [
    "AutoModel",
    "FunctionModel",
    "NetworkBlocked",
    "Reply",
    "ScriptError",
    "ScriptedModel",
    "Step",
    "ToolCallSpec",
    "block_network",
    "capture_events",
    "call",
    "example_value",
    "reply",
]
