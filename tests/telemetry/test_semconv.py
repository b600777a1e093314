"""Every ``gen_ai.*`` name lovia emits is checked against the installed
``opentelemetry-semantic-conventions`` package, so a renamed key fails CI."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest
from telemetry_helpers import Otel

from lovia import Agent, Runner, tool
from lovia.providers.base import ModelProfile, ModelRequest
from lovia.stores import MemoryStore
from lovia.telemetry import attributes as A
from lovia.telemetry import clear_prices, set_price
from lovia.testing import FunctionModel, call, reply
from lovia.testing._models import CallInfo
from lovia.usage import Usage
from lovia.view import DEFAULT_SUMMARY_PROMPT, Compaction


def semconv_names() -> set[str]:
    """Every string constant of the package's incubating attributes and metrics."""
    names: set[str] = set()
    for part in ("attributes", "metrics"):
        pkg = importlib.import_module(f"opentelemetry.semconv._incubating.{part}")
        for info in pkgutil.iter_modules(pkg.__path__):
            module = importlib.import_module(f"{pkg.__name__}.{info.name}")
            names.update(v for k, v in vars(module).items() if k.isupper() and isinstance(v, str))
    return names


@pytest.fixture(autouse=True)
def _prices() -> Any:
    set_price("test", "function", input_per_mtok=1.0, output_per_mtok=2.0)
    yield
    clear_prices()


async def _rich_run(otel: Otel) -> None:
    """Tools, a summary, cache reads and writes, reasoning: every attribute appears."""

    @tool
    def fetch(n: int) -> str:
        """Fetch page n."""
        return "x" * 1_500

    usage = Usage(
        input_tokens=100,
        output_tokens=20,
        cache_read_tokens=10,
        cache_write_tokens=5,
        reasoning_tokens=3,
    )

    def answer(req: ModelRequest, info: CallInfo) -> Any:
        if req.system == DEFAULT_SUMMARY_PROMPT:
            return "summary"
        k = sum(r.system != DEFAULT_SUMMARY_PROMPT for r in info.requests)
        return reply(tool_calls=[call("fetch", n=k)], usage=usage) if k < 12 else "done"

    model = FunctionModel(answer, profile=ModelProfile(context_window=4_000))
    agent = Agent(name="a", model=model, tools=[fetch], context=Compaction())
    store = MemoryStore()
    await Runner.run(
        agent, "go", max_turns=20, session=store, session_id="s1", tracer_provider=otel.tp
    )


def _emitted(otel: Otel) -> set[str]:
    keys: set[str] = set(otel.metrics())
    for span in otel.spans():
        keys.update(span.attributes or {})
        for event in span.events:
            keys.add(event.name)
            keys.update(event.attributes or {})
    for metric in otel.metrics().values():
        for point in metric.data.data_points:
            keys.update(point.attributes)
    return keys


async def test_every_emitted_gen_ai_name_is_in_the_semconv_package(otel: Otel) -> None:
    await _rich_run(otel)
    known = semconv_names()
    emitted = {k for k in _emitted(otel) if k.startswith("gen_ai.")}
    assert A.USAGE_CACHE_WRITE in emitted and A.USAGE_CACHE_READ in emitted
    unknown = emitted - known - set(A.NOT_IN_SEMCONV)
    assert not unknown, f"gen_ai.* names not in opentelemetry-semantic-conventions: {unknown}"


def test_every_gen_ai_constant_is_in_the_package_or_documented_as_not() -> None:
    known = semconv_names()
    ours = {v for k, v in vars(A).items() if k.isupper() and isinstance(v, str)}
    ours = {v for v in ours if v.startswith("gen_ai.")}
    assert ours - known <= set(A.NOT_IN_SEMCONV)
    # a documented exception that the package now defines is no exception any more
    assert not set(A.NOT_IN_SEMCONV) & known
    assert A.USAGE_CACHE_WRITE == "gen_ai.usage.cache_creation.input_tokens"
