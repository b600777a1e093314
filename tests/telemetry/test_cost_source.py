"""Each priced call says what priced it, on its ``chat`` span; the run span names the
prices in force. A self-hosted model priced at $0 is priced (a cost of 0 and a source),
never counted as unpriced."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from telemetry_helpers import Otel

from lovia import Agent, Runner, load_prices
from lovia.telemetry import attributes as A
from lovia.telemetry import clear_prices
from lovia.testing import FunctionModel, reply
from lovia.usage import Usage


@pytest.fixture
def prices(tmp_path: Path) -> Iterator[None]:
    path = tmp_path / "prices.yaml"
    path.write_text(
        "prices:\n"
        "  - {provider: local, model: '*', free: true}\n"
        "  - {provider: fake, model: tuned, input_per_mtok: 2.0, output_per_mtok: 8.0}\n",
        encoding="utf-8",
    )
    clear_prices()
    load_prices(path)
    yield
    clear_prices()


def _agent(provider: str, model: str) -> Agent[Any, Any]:
    def says(request: Any, info: Any) -> Any:
        return reply("ok", usage=Usage(input_tokens=1_000, output_tokens=500))

    return Agent(name="a", model=FunctionModel(says, provider=provider, model=model))


def _span(otel: Otel, prefix: str) -> dict[str, Any]:
    (found,) = [dict(s.attributes or {}) for s in otel.spans() if s.name.startswith(prefix)]
    return found


async def test_a_free_self_hosted_call_is_priced_at_zero_with_its_source(
    otel: Otel, prices: None
) -> None:
    result = await Runner.run(_agent("local", "llama3"), "go", tracer_provider=otel.tp)
    assert result.usage.unpriced == 0 and result.usage.cost_usd == 0.0
    chat = _span(otel, "chat")
    assert chat[A.COST_USD] == 0.0 and A.COST_UNPRICED not in chat
    assert re.fullmatch(r"overrides@[0-9a-f]{8}", chat[A.COST_SOURCE])
    run = _span(otel, "invoke_agent")
    assert A.COST_UNPRICED not in run
    assert run[A.PRICE_TABLE_VERSION].endswith("+" + chat[A.COST_SOURCE])
    assert not otel.metrics().get(A.M_COST_UNPRICED) or all(
        p.value == 0 for p in otel.metrics()[A.M_COST_UNPRICED].data.data_points
    )


async def test_a_fine_tune_call_costs_its_override_and_names_it(otel: Otel, prices: None) -> None:
    result = await Runner.run(_agent("fake", "tuned"), "go", tracer_provider=otel.tp)
    assert result.usage.cost_usd == pytest.approx((1_000 * 2.0 + 500 * 8.0) / 1e6)
    chat = _span(otel, "chat")
    assert chat[A.COST_USD] == pytest.approx(result.usage.cost_usd)
    assert chat[A.COST_SOURCE].startswith("overrides@")


async def test_a_table_priced_call_names_the_table_version(otel: Otel, prices: None) -> None:
    await Runner.run(_agent("openai", "gpt-4.1-mini"), "go", tracer_provider=otel.tp)
    chat = _span(otel, "chat")
    assert chat[A.COST_USD] > 0
    assert re.fullmatch(r"genai-prices==\S+", chat[A.COST_SOURCE])


async def test_an_unpriced_call_has_no_source(otel: Otel, prices: None) -> None:
    await Runner.run(_agent("fake", "no-such-model"), "go", tracer_provider=otel.tp)
    chat = _span(otel, "chat")
    assert chat[A.COST_UNPRICED] == 1
    assert A.COST_SOURCE not in chat and A.COST_USD not in chat
