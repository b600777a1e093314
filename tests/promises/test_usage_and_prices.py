"""Usage arithmetic and prices: the numbers budgets, dashboards and bills are made of."""

from __future__ import annotations

import pytest

from lovia import RunBudget
from lovia.pricing import (
    clear_prices,
    has_price,
    price_call,
    price_table_version,
    price_usage,
    set_price,
)
from lovia.usage import Usage

FULL = Usage(
    input_tokens=100,
    output_tokens=40,
    cache_read_tokens=30,
    cache_write_tokens=10,
    reasoning_tokens=5,
    requests=2,
    tool_calls=3,
    cost_usd=0.25,
    unpriced=1,
)


def test_adding_usage_adds_every_counter_including_tool_calls_and_cost() -> None:
    """A resumed run or a parent adds its children's usage: every counter must carry over,
    or ``max_tool_calls`` starts from zero after a resume."""
    total = Usage(
        input_tokens=1,
        output_tokens=2,
        cache_read_tokens=3,
        cache_write_tokens=4,
        reasoning_tokens=5,
        requests=6,
        tool_calls=7,
        cost_usd=0.5,
        unpriced=2,
    )
    total.add(FULL)
    assert total.to_dict() == {
        "input_tokens": 101,
        "output_tokens": 42,
        "cache_read_tokens": 33,
        "cache_write_tokens": 14,
        "reasoning_tokens": 10,
        "requests": 8,
        "tool_calls": 10,
        "cost_usd": 0.75,
        "missing": False,
        "unpriced": 3,  # calls whose cost is unknown: the cost is a lower bound
    }


@pytest.mark.parametrize(("mine", "theirs"), [(False, True), (True, False), (True, True)])
def test_missing_usage_is_sticky_when_added(mine: bool, theirs: bool) -> None:
    """One call with no usage makes the whole total "unknown", whichever side it is on."""
    total = Usage(missing=mine)
    total.add(Usage(missing=theirs))
    assert total.missing is True


def test_usage_known_on_both_sides_stays_known() -> None:
    total = Usage(input_tokens=1)
    total.add(Usage(output_tokens=1))
    assert total.missing is False
    assert total.total_tokens == 2


def test_minus_is_what_was_used_since_a_copy() -> None:
    before = FULL.copy()
    after = FULL.copy()
    after.add(
        Usage(
            input_tokens=7,
            output_tokens=1,
            cache_read_tokens=2,
            cache_write_tokens=1,
            reasoning_tokens=1,
            requests=1,
            tool_calls=2,
            cost_usd=0.5,
            missing=True,
            unpriced=1,
        )
    )
    delta = after.minus(before)
    assert delta.to_dict() == {
        "input_tokens": 7,
        "output_tokens": 1,
        "cache_read_tokens": 2,
        "cache_write_tokens": 1,
        "reasoning_tokens": 1,
        "requests": 1,
        "tool_calls": 2,
        "cost_usd": 0.5,
        "missing": True,
        "unpriced": 1,
    }


def test_copy_is_independent_and_equal() -> None:
    copy = FULL.copy()
    assert copy == FULL and copy is not FULL
    copy.add(FULL)
    assert FULL.input_tokens == 100


def test_usage_round_trips_through_a_dict_and_ignores_unknown_keys() -> None:
    data = {**FULL.to_dict(), "missing": True, "from_a_newer_lovia": 9}
    back = Usage.from_dict(data)
    assert back.to_dict() == {**FULL.to_dict(), "missing": True}
    assert Usage.from_dict({"output_tokens": 3}) == Usage(output_tokens=3)


# -- RunBudget: which limit trips, and when ------------------------------------------------


def _usage(**kw: int | float) -> Usage:
    return Usage(**kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("budget", "usage", "expected"),
    [
        (RunBudget(max_input_tokens=10), _usage(input_tokens=10), ("max_input_tokens", 10)),
        (RunBudget(max_output_tokens=10), _usage(output_tokens=10), ("max_output_tokens", 10)),
        (
            RunBudget(max_total_tokens=10),
            _usage(input_tokens=4, output_tokens=6),
            ("max_total_tokens", 10),
        ),
        (RunBudget(max_cost_usd=0.5), _usage(cost_usd=0.5), ("max_cost_usd", 0.5)),
    ],
)
def test_a_limit_trips_when_reached_not_only_when_passed(
    budget: RunBudget, usage: Usage, expected: tuple[str, float]
) -> None:
    for before in ("model", "call", "tool"):
        assert budget.exceeded(usage, turns=0, elapsed=0.0, before=before) == expected


@pytest.mark.parametrize(
    ("budget", "usage"),
    [
        (RunBudget(max_input_tokens=10), _usage(input_tokens=9)),
        (RunBudget(max_output_tokens=10), _usage(output_tokens=9)),
        (RunBudget(max_total_tokens=10), _usage(input_tokens=4, output_tokens=5)),
        (RunBudget(max_cost_usd=0.5), _usage(cost_usd=0.49)),
    ],
)
def test_a_limit_just_under_does_not_trip(budget: RunBudget, usage: Usage) -> None:
    assert budget.exceeded(usage, turns=0, elapsed=0.0) is None


def test_time_limit_is_checked_before_every_kind_of_step() -> None:
    budget = RunBudget(max_seconds=2.0)
    for before in ("model", "call", "tool"):
        assert budget.exceeded(Usage(), 0, 2.0, before=before) == ("max_seconds", 2.0)
        assert budget.exceeded(Usage(), 0, 1.99, before=before) is None


def test_turn_limit_is_checked_only_before_a_turn() -> None:
    budget = RunBudget(max_turns=3)
    assert budget.exceeded(Usage(), 3, 0.0, before="model") == ("max_turns", 3)
    assert budget.exceeded(Usage(), 2, 0.0, before="model") is None
    assert budget.exceeded(Usage(), 3, 0.0, before="call") is None
    assert budget.exceeded(Usage(), 3, 0.0, before="tool") is None


def test_tool_call_limit_is_checked_only_before_a_tool() -> None:
    budget = RunBudget(max_tool_calls=2)
    assert budget.exceeded(Usage(tool_calls=2), 0, 0.0, before="tool") == ("max_tool_calls", 2)
    assert budget.exceeded(Usage(tool_calls=1), 0, 0.0, before="tool") is None
    assert budget.exceeded(Usage(tool_calls=2), 0, 0.0, before="model") is None
    assert budget.exceeded(Usage(tool_calls=2), 0, 0.0, before="call") is None


def test_the_first_limit_in_order_is_named_when_several_trip() -> None:
    budget = RunBudget(max_turns=1, max_input_tokens=1, max_seconds=1.0)
    spent = Usage(input_tokens=5)
    assert budget.exceeded(spent, 1, 5.0, before="model") == ("max_turns", 1)
    assert budget.exceeded(spent, 1, 5.0, before="call") == ("max_input_tokens", 5)
    tools = RunBudget(max_tool_calls=1, max_input_tokens=1)
    assert tools.exceeded(Usage(input_tokens=5, tool_calls=1), 0, 0.0, before="tool") == (
        "max_tool_calls",
        1,
    )


def test_an_unlimited_budget_never_trips() -> None:
    huge = Usage(input_tokens=10**9, output_tokens=10**9, tool_calls=10**6, cost_usd=1e6)
    for before in ("model", "call", "tool"):
        assert RunBudget().exceeded(huge, 10**6, 1e9, before=before) is None


# -- prices ---------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _no_price_overrides() -> None:
    clear_prices()


def test_a_call_with_no_usage_costs_nothing_even_for_a_priced_model() -> None:
    """A provider that reported no usage must not be billed (nor trip ``max_cost_usd``)."""
    set_price("acme", "m", input_per_mtok=1e6, output_per_mtok=1e6)
    assert price_usage("acme", "m", Usage(missing=True)) == 0.0
    assert price_call("acme", "m", Usage(missing=True)) is None  # unknown, not free


def test_missing_usage_with_some_counted_tokens_is_still_priced() -> None:
    set_price("acme", "m", input_per_mtok=1_000_000, output_per_mtok=2_000_000)
    assert price_usage("acme", "m", Usage(input_tokens=3, missing=True)) == pytest.approx(3.0)
    assert price_usage("acme", "m", Usage(output_tokens=3, missing=True)) == pytest.approx(6.0)


def test_an_unknown_model_costs_zero_and_has_no_price() -> None:
    assert has_price("acme", "no-such-model-anywhere") is False
    assert price_usage("acme", "no-such-model-anywhere", Usage(input_tokens=1000)) == 0.0
    assert price_call("acme", "no-such-model-anywhere", Usage(input_tokens=1000)) is None


def test_override_prices_each_kind_of_token_at_its_own_rate() -> None:
    """Per million tokens: plain input, output, cache reads and cache writes each at their rate;
    ``input_tokens`` includes the cached ones, so they are not billed twice."""
    set_price(
        "Acme",
        "Model-X",
        input_per_mtok=1.0,
        output_per_mtok=10.0,
        cache_read_per_mtok=0.1,
        cache_write_per_mtok=2.0,
    )
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=100_000,
        cache_read_tokens=500_000,
        cache_write_tokens=200_000,
    )
    # 300k plain * 1 + 100k out * 10 + 500k read * 0.1 + 200k write * 2 (per million)
    expected = 0.3 + 1.0 + 0.05 + 0.4
    assert price_usage("acme", "model-x", usage) == pytest.approx(expected)
    assert has_price("ACME", "MODEL-X") is True


def test_cache_tokens_without_their_own_rate_are_priced_as_input() -> None:
    set_price("acme", "m", input_per_mtok=2.0, output_per_mtok=0.0)
    usage = Usage(input_tokens=1_000_000, cache_read_tokens=250_000, cache_write_tokens=250_000)
    assert price_usage("acme", "m", usage) == pytest.approx(2.0)


def test_more_cached_than_input_never_gives_a_negative_plain_part() -> None:
    set_price("acme", "m", input_per_mtok=1.0, output_per_mtok=0.0, cache_read_per_mtok=0.5)
    usage = Usage(input_tokens=100, cache_read_tokens=1_000_000)
    assert price_usage("acme", "m", usage) == pytest.approx(0.5)


def test_overrides_win_over_the_table_and_clearing_restores_it() -> None:
    table_cost = price_usage("openai", "gpt-4.1-mini", Usage(input_tokens=1_000_000))
    assert table_cost > 0  # the genai-prices table knows it
    set_price("openai", "gpt-4.1-mini", input_per_mtok=123.0, output_per_mtok=0.0)
    assert price_usage("openai", "gpt-4.1-mini", Usage(input_tokens=1_000_000)) == pytest.approx(
        123.0
    )
    assert "+overrides@" in price_table_version()
    clear_prices()
    assert price_usage("openai", "gpt-4.1-mini", Usage(input_tokens=1_000_000)) == table_cost
    assert "+overrides" not in price_table_version()
    assert price_table_version().startswith("genai-prices==")


def test_by_default_a_budget_is_checked_as_before_a_turn() -> None:
    assert RunBudget(max_turns=1).exceeded(Usage(), 1, 0.0) == ("max_turns", 1)
    assert RunBudget(max_tool_calls=1).exceeded(Usage(tool_calls=5), 0, 0.0) is None


# -- prices equal genai-prices' own calculation --------------------------------------------

GOLDEN_MODELS = [
    ("openai", "gpt-4.1-mini"),
    ("openai", "gpt-4o"),
    ("anthropic", "claude-sonnet-4-5"),
    ("anthropic", "claude-sonnet-4-20250514"),  # long-context tiers above 200k input
    ("google", "gemini-2.5-pro"),  # tiered above 200k input
    ("perplexity", "sonar"),  # a fee per request on top of the tokens
]
GOLDEN_USAGES = [
    Usage(input_tokens=0, output_tokens=50),  # a call billed for its output (and request) only
    Usage(input_tokens=1_000, output_tokens=200),
    Usage(input_tokens=50_000, output_tokens=3_000, cache_read_tokens=30_000),
    Usage(
        input_tokens=80_000,
        output_tokens=1_000,
        cache_read_tokens=20_000,
        cache_write_tokens=10_000,
        reasoning_tokens=500,
    ),
    Usage(input_tokens=200_000, output_tokens=10),  # exactly at a tier start
    Usage(
        input_tokens=300_000,
        output_tokens=1_000,
        cache_read_tokens=100_000,
        cache_write_tokens=50_000,
    ),
]


@pytest.mark.parametrize(("provider", "model"), GOLDEN_MODELS)
@pytest.mark.parametrize("usage", GOLDEN_USAGES, ids=lambda u: f"in{u.input_tokens}")
def test_cost_equals_genai_prices_for_the_same_usage(
    provider: str, model: str, usage: Usage
) -> None:
    """Cache reads, cache writes, long-context tiers and per-request fees priced exactly as
    genai-prices does."""
    genai_prices = pytest.importorskip("genai_prices")
    expected = genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens or None,
            cache_write_tokens=usage.cache_write_tokens or None,
        ),
        model_ref=model,
        provider_id=provider,
    ).total_price
    assert price_usage(provider, model, usage) == pytest.approx(float(expected), rel=1e-9)
    assert has_price(provider, model)


def test_a_pricing_failure_reads_as_no_cost_and_never_breaks_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lovia import pricing

    set_price("acme", "m", input_per_mtok=1.0, output_per_mtok=1.0)

    def broken(self: object, usage: Usage) -> float:
        raise ArithmeticError("bad table")

    monkeypatch.setattr(pricing._Price, "cost", broken)
    assert price_usage("acme", "m", Usage(input_tokens=5)) == 0.0


def test_a_looked_up_price_is_cached_per_model() -> None:
    from lovia import pricing

    price_usage("openai", "gpt-4.1-mini", Usage(input_tokens=1))
    cached = pricing._cache[("openai", "gpt-4.1-mini")]
    assert cached is not None and cached.input > 0
    assert pricing._cache.get(("acme", "nothing")) is None
    price_usage("acme", "nothing", Usage(input_tokens=1))
    assert ("acme", "nothing") in pricing._cache and pricing._cache[("acme", "nothing")] is None
