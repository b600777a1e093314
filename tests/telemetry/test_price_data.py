"""Prices as data: ``set_price`` is checked like a price file, and genai-prices' own
background update is honoured only when the user turns it on (no network in tests: the
fetch is replaced)."""

from __future__ import annotations

import copy
import logging
import math
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from genai_prices import data_snapshot, update_prices
from genai_prices.types import ConditionalPrice, ModelPrice, StartDateConstraint

import lovia
from lovia import pricing
from lovia.pricing import (
    auto_update_prices,
    clear_prices,
    price_call,
    price_source,
    set_price,
    stop_auto_update,
)
from lovia.usage import Usage

MODEL = ("openai", "gpt-4o-mini")
CALL = Usage(input_tokens=1_000_000, output_tokens=1_000_000)


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("LOVIA_PRICES", raising=False)
    monkeypatch.delenv("LOVIA_PRICES_AUTO_UPDATE", raising=False)
    clear_prices()
    yield
    thread = update_prices._shared_updater.thread  # pyright: ignore[reportPrivateUsage]
    stop_auto_update()
    if thread is not None:  # the next test starts its own updater from a clean slate
        thread.join(5)
    data_snapshot.set_custom_snapshot(None)
    clear_prices()


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"input_per_mtok": -1.0, "output_per_mtok": 1.0}, "input_per_mtok is -1.0"),
        ({"input_per_mtok": 1.0, "output_per_mtok": math.nan}, "output_per_mtok is nan"),
        ({"input_per_mtok": 1.0, "output_per_mtok": math.inf}, "output_per_mtok is inf"),
        (
            {"input_per_mtok": 1.0, "output_per_mtok": 1.0, "cache_read_per_mtok": -0.5},
            "cache_read_per_mtok is -0.5",
        ),
        ({"input_per_mtok": "1", "output_per_mtok": 1.0}, "must be a number"),
        ({"input_per_mtok": 1.0, "output_per_mtok": 1.0, "input_pre_mtok": 2}, "unknown key"),
    ],
)
def test_set_price_refuses_what_a_price_file_refuses(kwargs: dict[str, Any], said: str) -> None:
    set_price("acme", "kept", input_per_mtok=1.0, output_per_mtok=2.0)
    with pytest.raises(lovia.UserError) as caught:
        set_price("acme", "m", **kwargs)
    assert caught.value.message.startswith("set_price(): ")
    assert said in caught.value.message
    assert caught.value.hint
    # nothing changed: the bad price is not half-applied, the earlier one is kept
    assert price_call("acme", "m", CALL) is None
    assert price_call("acme", "kept", CALL) == pytest.approx(3.0)


def test_set_price_refuses_an_empty_model_name() -> None:
    with pytest.raises(lovia.UserError, match="'model' must be a non-empty string"):
        set_price("acme", "  ", input_per_mtok=1.0, output_per_mtok=1.0)


def _fetched(scale: int) -> Any:
    """A snapshot as a fetch would return it: the bundled table, every price x ``scale``
    for ``openai:gpt-4o-mini``."""
    bundled: Any = data_snapshot.get_snapshot()
    providers: list[Any] = []
    for provider in bundled.providers:
        if provider.id == "openai":
            provider = copy.copy(provider)
            provider.models = [copy.copy(m) for m in provider.models]
            for model in provider.models:
                if model.id == "gpt-4o-mini":
                    model.prices = ModelPrice(
                        input_mtok=model.prices.input_mtok * scale,
                        output_mtok=model.prices.output_mtok * scale,
                    )
        providers.append(provider)
    return data_snapshot.DataSnapshot(providers, from_auto_update=True)


def test_auto_update_is_off_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    fetches: list[str] = []
    monkeypatch.setattr(update_prices.UpdatePrices, "fetch", lambda self: fetches.append("x"))
    before = price_call(*MODEL, CALL)
    assert before is not None and price_source(*MODEL) == pricing.price_table_version()
    assert fetches == []  # pricing never fetched on its own


def test_auto_update_prices_calls_from_the_fetched_table(monkeypatch: pytest.MonkeyPatch) -> None:
    bundled = price_call(*MODEL, CALL)
    assert bundled is not None
    monkeypatch.setattr(update_prices.UpdatePrices, "fetch", lambda self: _fetched(2))
    auto_update_prices(interval_s=3600, wait=5)
    assert price_call(*MODEL, CALL) == pytest.approx(2 * bundled)  # the cached lookup is dropped
    source = price_source(*MODEL)
    assert source is not None and source.startswith("genai-prices==")
    assert "+update@" in source  # a fetched table is named apart from the bundled one
    # an override still wins over a fetched table
    set_price(*MODEL, input_per_mtok=1.0, output_per_mtok=1.0)
    assert price_call(*MODEL, CALL) == pytest.approx(2.0)


def test_the_environment_turns_auto_update_on(monkeypatch: pytest.MonkeyPatch) -> None:
    bundled = price_call(*MODEL, CALL)
    assert bundled is not None
    monkeypatch.setattr(update_prices.UpdatePrices, "fetch", lambda self: _fetched(3))
    monkeypatch.setenv("LOVIA_PRICES_AUTO_UPDATE", "600")
    clear_prices()  # the environment is read again on the next pricing
    price_call(*MODEL, CALL)
    assert pricing._updater is not None and pricing._updater.update_interval == 600.0  # pyright: ignore[reportPrivateUsage]
    pricing._updater.wait(5)  # pyright: ignore[reportPrivateUsage]
    assert price_call(*MODEL, CALL) == pytest.approx(3 * bundled)


@pytest.mark.parametrize("value", ["soon", "-5"])
def test_a_bad_auto_update_setting_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("LOVIA_PRICES_AUTO_UPDATE", value)
    clear_prices()
    with pytest.raises(lovia.UserError, match=r"LOVIA_PRICES_AUTO_UPDATE|interval_s") as caught:
        price_call(*MODEL, CALL)
    assert caught.value.hint


def test_a_failed_fetch_keeps_the_table_in_use(monkeypatch: pytest.MonkeyPatch) -> None:
    bundled = price_call(*MODEL, CALL)

    def refuse(self: object) -> None:
        raise OSError("no route to host")

    monkeypatch.setattr(update_prices.UpdatePrices, "fetch", refuse)
    with pytest.raises(OSError, match="no route"):
        auto_update_prices(wait=5)  # waiting surfaces the failure
    assert price_call(*MODEL, CALL) == bundled


def test_a_stopped_auto_update_keeps_the_fetched_table_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After ``stop_auto_update()`` the table fetched last stays in use, and the source
    recorded with each cost still names it as fetched, not as the bundled one."""
    bundled = price_call(*MODEL, CALL)
    assert bundled is not None
    monkeypatch.setattr(update_prices.UpdatePrices, "fetch", lambda self: _fetched(2))
    auto_update_prices(wait=5)
    stop_auto_update()
    clear_prices()  # a fresh lookup after the stop: still the fetched table
    assert price_call(*MODEL, CALL) == pytest.approx(2 * bundled)
    source = price_source(*MODEL)
    assert source is not None and "+update@" in source


@pytest.mark.parametrize("value", ["0", "false", "No", "OFF", " off "])
def test_auto_update_stays_off_when_the_environment_says_no(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setattr(update_prices.UpdatePrices, "fetch", lambda self: _fetched(2))
    monkeypatch.setenv("LOVIA_PRICES_AUTO_UPDATE", value)
    clear_prices()
    bundled = price_call(*MODEL, CALL)
    assert pricing._updater is None  # pyright: ignore[reportPrivateUsage]
    assert bundled is not None and "+update@" not in (price_source(*MODEL) or "")


@pytest.mark.parametrize("value", ["1", "true", "Yes", "ON"])
def test_a_yes_in_the_environment_turns_auto_update_on_hourly(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setattr(update_prices.UpdatePrices, "fetch", lambda self: _fetched(2))
    monkeypatch.setenv("LOVIA_PRICES_AUTO_UPDATE", value)
    clear_prices()
    price_call(*MODEL, CALL)
    updater: Any = pricing._updater  # pyright: ignore[reportPrivateUsage]
    assert updater is not None and updater.update_interval == 3600.0


def _table_with(prices: Any) -> Any:
    """The bundled table with ``openai:gpt-4o-mini`` priced ``prices`` instead."""
    bundled: Any = data_snapshot.get_snapshot()
    providers: list[Any] = []
    for provider in bundled.providers:
        if provider.id == "openai":
            provider = copy.copy(provider)
            provider.models = [copy.copy(m) for m in provider.models]
            for model in provider.models:
                if model.id == "gpt-4o-mini":
                    model.prices = prices
        providers.append(provider)
    return data_snapshot.DataSnapshot(providers, from_auto_update=False)


@pytest.mark.parametrize(
    ("prices", "cost"),
    [
        (ModelPrice(input_mtok=Decimal(2)), 2.0),  # an embedding model: input only
        (ModelPrice(output_mtok=Decimal(3)), 3.0),  # output only: input tokens are free
        (ModelPrice(input_mtok=Decimal(0), output_mtok=Decimal(0)), 0.0),  # free, priced
    ],
)
def test_a_table_model_with_one_token_rate_is_priced_at_that_rate(
    prices: ModelPrice, cost: float
) -> None:
    """A missing input or output rate in the table costs nothing; it does not make the
    model unpriced."""
    data_snapshot.set_custom_snapshot(_table_with(prices))
    assert price_call(*MODEL, CALL) == pytest.approx(cost)


def test_a_table_model_with_no_token_rate_is_unpriced() -> None:
    """Priced per request or per image only: its token cost is unknown, not $0."""
    data_snapshot.set_custom_snapshot(_table_with(ModelPrice(input_image_mtok=Decimal(1))))
    assert price_call(*MODEL, CALL) is None


def _dated(start: date) -> list[ConditionalPrice]:
    """$1 / $1 per MTok until ``start`` (UTC), $5 / $5 from then on."""
    return [
        ConditionalPrice(prices=ModelPrice(input_mtok=Decimal(1), output_mtok=Decimal(1))),
        ConditionalPrice(
            constraint=StartDateConstraint(start_date=start),
            prices=ModelPrice(input_mtok=Decimal(5), output_mtok=Decimal(5)),
        ),
    ]


def test_a_date_ranged_price_in_force_today_is_used() -> None:
    data_snapshot.set_custom_snapshot(_table_with(_dated(date(2001, 1, 1))))
    assert price_call(*MODEL, CALL) == pytest.approx(10.0)
    clear_prices()
    data_snapshot.set_custom_snapshot(_table_with(_dated(date(2999, 1, 1))))
    assert price_call(*MODEL, CALL) == pytest.approx(2.0)


def test_a_price_change_takes_effect_at_utc_midnight_whatever_the_local_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A table's price dates are UTC dates: on a machine whose local date is already (or
    still) another day, the price in force is the UTC day's."""
    now = datetime.now(tz=UTC)
    if now.hour >= 12:  # UTC+14: the local date is tomorrow's; the new price starts then
        zone, start, expected = "Etc/GMT-14", now.date() + timedelta(days=1), 2.0
    else:  # UTC-12: the local date is yesterday's; the new price started today
        zone, start, expected = "Etc/GMT+12", now.date(), 10.0
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        data_snapshot.set_custom_snapshot(_table_with(_dated(start)))
        assert price_call(*MODEL, CALL) == pytest.approx(expected)
    finally:
        monkeypatch.undo()
        time.tzset()


def test_without_genai_prices_the_table_is_none_and_pricing_still_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ``otel`` extra not installed: no table, every model unpriced, no error."""
    monkeypatch.setattr(pricing, "_package_version", lambda: "none")
    monkeypatch.setitem(sys.modules, "genai_prices", None)
    monkeypatch.setitem(sys.modules, "genai_prices.data_snapshot", None)
    assert pricing.price_table_version() == "none"
    assert price_call(*MODEL, CALL) is None
    assert price_source(*MODEL) is None


def test_an_unpriced_model_is_logged_once_at_info(caplog: pytest.LogCaptureFixture) -> None:
    """One line per model (case aside), naming it and how to price it; not a warning."""
    caplog.set_level(logging.DEBUG, logger="lovia.telemetry")
    pricing._warned.clear()  # pyright: ignore[reportPrivateUsage]
    for provider, model in [("acme", "m1"), ("ACME", "M1"), ("acme", "m1"), ("acme", "m2")]:
        assert price_call(provider, model, CALL) is None
    said = [(r.levelno, r.getMessage()) for r in caplog.records]
    line = (
        "no price is known for {}: its calls count as unpriced (lovia.cost.unpriced) and "
        "every cost that includes them is a lower bound; register one with lovia.set_price "
        "or a price file (lovia.load_prices, LOVIA_PRICES)"
    )
    assert said == [(logging.INFO, line.format("acme:m1")), (logging.INFO, line.format("acme:m2"))]


def test_a_failed_pricing_is_logged_at_debug_with_its_traceback(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="lovia.telemetry")
    set_price("acme", "m", input_per_mtok=1.0, output_per_mtok=1.0)

    def broken(self: object, usage: Usage) -> float:
        raise ArithmeticError("bad table")

    monkeypatch.setattr(pricing._Price, "cost", broken)  # pyright: ignore[reportPrivateUsage]
    assert price_call("acme", "m", CALL) is None
    [record] = caplog.records
    assert (record.levelno, record.getMessage()) == (logging.DEBUG, "pricing acme/m failed")
    assert record.exc_info is not None and isinstance(record.exc_info[1], ArithmeticError)


def test_auto_update_fetches_hourly_by_default_and_does_not_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``auto_update_prices()`` returns at once (the fetch runs in the background) and
    fetches again every hour."""
    release = threading.Event()

    def slow_fetch(self: object) -> Any:
        release.wait(20)
        return _fetched(2)

    monkeypatch.setattr(update_prices.UpdatePrices, "fetch", slow_fetch)
    started = time.monotonic()
    try:
        auto_update_prices()
        assert time.monotonic() - started < 10
    finally:
        release.set()
    updater: Any = pricing._updater  # pyright: ignore[reportPrivateUsage]
    assert updater is not None and updater.update_interval == 3600.0


@pytest.mark.parametrize(("wait", "seconds"), [(True, 30.0), (2, 2.0), (0.5, 0.5)])
def test_waiting_for_the_first_fetch_is_bounded(
    monkeypatch: pytest.MonkeyPatch, wait: bool | float, seconds: float
) -> None:
    """``wait=True`` waits up to 30 s, a number waits that many seconds."""
    waited: list[float | None] = []
    monkeypatch.setattr(update_prices.UpdatePrices, "fetch", lambda self: _fetched(2))
    monkeypatch.setattr(
        update_prices.UpdatePrices, "wait", lambda self, timeout=None: waited.append(timeout)
    )
    auto_update_prices(wait=wait)
    assert waited == [seconds]


@pytest.mark.parametrize("interval", [0, -1.0, math.nan, math.inf])
def test_a_bad_update_interval_is_refused(interval: float) -> None:
    with pytest.raises(lovia.UserError) as caught:
        auto_update_prices(interval_s=interval)
    assert caught.value.message == (
        f"auto_update_prices(interval_s={interval!r}): expected seconds > 0"
    )
    assert caught.value.hint == "e.g. interval_s=3600 (the genai-prices default: hourly)."
    assert pricing._updater is None  # pyright: ignore[reportPrivateUsage]


def test_an_update_interval_under_a_second_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(update_prices.UpdatePrices, "fetch", lambda self: _fetched(2))
    auto_update_prices(interval_s=0.5)
    updater: Any = pricing._updater  # pyright: ignore[reportPrivateUsage]
    assert updater is not None and updater.update_interval == 0.5


def test_auto_update_without_genai_prices_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", None)
    with pytest.raises(lovia.UserError) as caught:
        auto_update_prices()
    assert caught.value.message == "auto_update_prices() needs the genai-prices package"
    assert caught.value.hint == "pip install 'lovia[otel]'"


def test_a_bad_auto_update_setting_names_the_variable_and_the_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LOVIA_PRICES_AUTO_UPDATE", "soon")
    clear_prices()
    with pytest.raises(lovia.UserError) as caught:
        price_call(*MODEL, CALL)
    assert caught.value.message == (
        "LOVIA_PRICES_AUTO_UPDATE='soon' is neither 1/0 nor a number of seconds"
    )
