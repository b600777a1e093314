"""Testing an agent without a model: ``lovia.testing.ScriptedModel``.

A ``ScriptedModel`` plays the model from a script of steps (a text answer, ``call(...)``
for a tool call, a list of calls for parallel calls, ``reply(...)`` for everything at
once, or an exception). It is strict: an extra model call fails the run with
``ScriptError``, ``assert_consumed()`` fails on steps never used, and ``requests``
records exactly what the model was sent. The same code works under pytest.

Run: python examples/05_testing.py
"""

from __future__ import annotations

from lovia import Agent, Runner, tool
from lovia.testing import ScriptedModel, block_network, call
from lovia.transcript import ToolResultEntry


@tool
def stock(sku: str) -> int:
    """Units in stock for a SKU."""
    return {"KB-01": 3}.get(sku, 0)


def test_agent_checks_stock() -> None:
    model = ScriptedModel([call("stock", sku="KB-01"), "3 keyboards are in stock."])
    agent = Agent(name="shop", model=model, tools=[stock])

    with block_network():  # a real API call here would raise NetworkBlocked
        result = Runner.run_sync(agent, "How many KB-01 do you have?")

    assert result.output == "3 keyboards are in stock."
    assert result.turns == 2
    model.assert_consumed()
    # The second request carried the tool's result back to the model.
    sent = [e for e in model.requests[1].messages if isinstance(e, ToolResultEntry)]
    assert [(e.name, e.content) for e in sent] == [("stock", "3")]


if __name__ == "__main__":
    test_agent_checks_stock()
    print("test_agent_checks_stock: ok")
