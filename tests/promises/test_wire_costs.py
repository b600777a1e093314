"""Every recorded provider answer that carries usage costs what genai-prices says.

For each successful exchange in ``tests/fixtures/wire`` (OpenAI Chat, OpenAI-compatible
servers, OpenAI Responses, Anthropic; streamed and not; cache reads and writes,
reasoning tokens, Anthropic cache creation, OpenAI cached input), the answer is replayed
through lovia's adapter and:

- lovia's cost of the call equals ``genai_prices.calc_price`` on the same usage (None
  exactly where genai-prices knows no price: an unknown model is unpriced, not free);
- for a JSON (non-streamed) body, lovia's usage equals what genai-prices' own
  ``extract_usage`` reads from the raw body (input incl. cache, cache read and write,
  output), so the two agree on the tokens as well as on the arithmetic.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, cast

import pytest

from lovia.pricing import clear_prices, price_call
from lovia.usage import Usage
from providers.test_wire_replay import OK
from providers.wire import SIMPLE, all_cases, collect, provider_for, replay_client

genai_prices = pytest.importorskip("genai_prices")

CASES = [c for c in all_cases() if c.id in OK]
"""Every recorded answer (the provider tests list each case as an answer or an error)."""
FLAVOR = {"openai_chat": "chat", "openai_responses": "responses", "anthropic": "default"}
PRICED_AT_LEAST = 10
"""Recorded answers on models genai-prices knows (the check must not pass vacuously)."""


@pytest.fixture(autouse=True)
def _table_only() -> None:
    clear_prices()  # the table's prices, no override


def _expected(provider: str, model: str, usage: Usage) -> float | None:
    try:
        found: Any = genai_prices.calc_price(
            genai_prices.Usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens or None,
                cache_write_tokens=usage.cache_write_tokens or None,
            ),
            model_ref=model,
            provider_id=provider,
        )
    except LookupError:
        return None
    return float(found.total_price)


async def _answer(c: Any) -> tuple[str, str, Usage]:
    async with provider_for(c, replay_client(c)) as provider:
        _, response = await collect(provider.stream(SIMPLE))
    return provider.name, response.model or provider.model, response.usage


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
async def test_a_recorded_call_costs_what_genai_prices_says(c: Any) -> None:
    provider, model, usage = await _answer(c)
    cost = price_call(provider, model, usage)
    if usage.missing:  # the server sent no usage: unknown, never $0
        assert cost is None
        return
    expected = _expected(provider, model, usage)
    if expected is None:
        assert cost is None, f"{provider}:{model} has no genai-prices price"
    else:
        assert cost == pytest.approx(expected, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize(
    "c", [c for c in CASES if not c.stream and c.folder in FLAVOR], ids=lambda c: c.id
)
async def test_lovia_reads_the_tokens_genai_prices_reads(c: Any) -> None:
    provider, _, usage = await _answer(c)
    try:
        extracted: Any = genai_prices.extract_usage(
            json.loads(c.body), provider_id=provider, api_flavor=FLAVOR[c.folder]
        )
    except (ValueError, LookupError, KeyError, TypeError) as exc:
        pytest.fail(f"genai-prices cannot read {c.id}: {exc!r}")
    theirs = extracted.usage
    assert (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    ) == (
        theirs.input_tokens or 0,
        theirs.output_tokens or 0,
        theirs.cache_read_tokens or 0,
        theirs.cache_write_tokens or 0,
    )


async def test_the_recordings_cover_reasoning_and_priced_models() -> None:
    """The corpus holds what the promise is about; a shrunken fixture set fails here."""
    seen = [await _answer(c) for c in CASES]
    priced = [s for s in seen if price_call(*s) is not None]
    assert len(priced) >= PRICED_AT_LEAST
    assert any(u.reasoning_tokens for _, _, u in priced)  # priced reasoning models
    assert {p for p, _, _ in priced} == {"openai", "anthropic"}


# The recorded answers all report zero cache tokens, so the cache fields are checked on
# recorded bodies whose usage numbers are edited here (in memory, nothing vendored):
# the field names and nesting are the providers' own.
CACHED: list[tuple[str, Any]] = [
    (
        "anthropic/nonstream_text",
        {"input_tokens": 17, "cache_creation_input_tokens": 1200, "cache_read_input_tokens": 3400},
    ),
    (
        "openai_chat/nonstream_text",
        {"prompt_tokens": 5000, "prompt_tokens_details": {"cached_tokens": 4096}},
    ),
    (
        "openai_responses/nonstream_text",
        {"input_tokens": 5000, "input_tokens_details": {"cached_tokens": 4096}},
    ),
]


def _merge(into: dict[str, Any], edits: dict[str, Any]) -> None:
    for key, value in edits.items():
        if isinstance(value, dict):
            _merge(into.setdefault(key, {}), cast("dict[str, Any]", value))
        else:
            into[key] = value


@pytest.mark.parametrize(("case_id", "edits"), CACHED, ids=[c for c, _ in CACHED])
async def test_cache_reads_and_writes_cost_what_genai_prices_says(
    case_id: str, edits: dict[str, Any]
) -> None:
    original = next(c for c in CASES if c.id == case_id)
    body = json.loads(original.body)
    _merge(body["usage"], edits)
    c = dataclasses.replace(original, body=json.dumps(body).encode())
    provider, model, usage = await _answer(c)
    assert usage.cache_read_tokens in (3400, 4096)
    assert usage.cache_write_tokens == (1200 if provider == "anthropic" else 0)
    extracted: Any = genai_prices.extract_usage(
        body, provider_id=provider, api_flavor=FLAVOR[c.folder]
    )
    theirs = extracted.usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        theirs.input_tokens,
        theirs.cache_read_tokens or 0,
        theirs.cache_write_tokens or 0,
    )
    expected = _expected(provider, model, usage)
    assert expected is not None
    assert price_call(provider, model, usage) == pytest.approx(expected, rel=1e-9)
    # cached input is cheaper than the same tokens uncached
    plain = Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
    plain_cost = price_call(provider, model, plain)
    assert plain_cost is not None and expected != pytest.approx(plain_cost)
