"""The public test seams: capture_events and the unconsumed-script pytest plugin."""

from __future__ import annotations

import pytest

from lovia import Agent, Runner, events, tool
from lovia.testing import ScriptedModel, call, capture_events

pytest_plugins = ["pytester"]


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


async def test_capture_events_sees_what_run_emits_in_order() -> None:
    agent = Agent(name="a", model=ScriptedModel([call("ping"), "done"]), tools=[ping])
    with capture_events() as seen:
        result = await Runner.run(agent, "hi")
    kinds = [type(e).__name__ for e in seen]
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunCompleted"
    done = [e for e in seen if isinstance(e, events.ToolCallCompleted)]
    assert [e.call.name for e in done] == ["ping"]
    assert {e.run_id for e in seen} == {result.run_id}


async def test_capture_events_matches_the_stream() -> None:
    def agent() -> Agent:
        return Agent(name="a", model=ScriptedModel([call("ping"), "done"]), tools=[ping])

    with capture_events() as seen:
        await Runner.run(agent(), "hi")
    handle = Runner.stream(agent(), "hi")
    streamed = [type(e).__name__ async for e in handle]
    assert [type(e).__name__ for e in seen] == streamed


async def test_capture_events_stops_at_the_end_of_the_block() -> None:
    with capture_events() as seen:
        pass
    await Runner.run(Agent(name="a", model=ScriptedModel(["x"])), "hi")
    assert seen == []


PLUGIN_TEST = """
import pytest
from lovia import Agent, Runner
from lovia.testing import ScriptedModel

pytest_plugins = ["lovia.testing.pytest_plugin"]

def test_left_over():
    Runner.run_sync(Agent(name="a", model=ScriptedModel(["one", "two"])), "hi")

@pytest.mark.lovia_unconsumed
def test_left_over_on_purpose():
    Runner.run_sync(Agent(name="a", model=ScriptedModel(["one", "two"])), "hi")

def test_all_used():
    Runner.run_sync(Agent(name="a", model=ScriptedModel(["one"])), "hi")

@pytest.fixture
def model():
    return ScriptedModel(["one", "two"])

def test_fixture_model_checked_too(model):
    Runner.run_sync(Agent(name="a", model=model), "hi")
"""


def test_plugin_fails_a_test_that_leaves_script_steps(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(PLUGIN_TEST)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    # A subprocess: in-process, the outer test's own tracking would see the inner models.
    out = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    out.assert_outcomes(passed=2, failed=2)
    out.stdout.fnmatch_lines(["*test_left_over*", "*1 left*"])
    assert "test_fixture_model_checked_too" in out.stdout.str()


@pytest.mark.parametrize("client", ["httpx", "httpx2"])
async def test_block_network_guards_every_client_a_provider_may_use(client: str) -> None:
    """httpx2 is the providers' default when installed: the guard must cover it too."""
    import importlib

    from lovia.testing import NetworkBlocked, block_network

    module = importlib.import_module(client)  # both are installed by `make test`
    with block_network():
        async with module.AsyncClient() as http:
            with pytest.raises(NetworkBlocked):
                await http.get("https://api.openai.com/v1/models")
        with module.Client() as http, pytest.raises(NetworkBlocked):
            http.get("https://api.anthropic.com/v1/messages")
