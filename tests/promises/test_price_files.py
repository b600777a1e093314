"""Prices as data the user controls: a price file, LOVIA_PRICES, an explicit $0 for a
self-hosted model, per-token prices for a fine-tune, and the source named with the price."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import lovia
from lovia.errors import UserError
from lovia.pricing import (
    clear_prices,
    has_price,
    load_prices,
    price_call,
    price_source,
    price_table_version,
    set_price,
)
from lovia.usage import Usage

FINETUNE = "ft:gpt-4o-mini:acme:support:abc123"
PRICES = f"""\
prices:
  - provider: openai
    model: "{FINETUNE}"
    input_per_mtok: 3.0
    output_per_mtok: 12.0
    cache_read_per_mtok: 1.5
    cache_write_per_mtok: 3.75
  - provider: ollama
    model: "*"
    free: true
"""


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("LOVIA_PRICES", raising=False)
    clear_prices()
    yield
    monkeypatch.delenv("LOVIA_PRICES", raising=False)
    clear_prices()


def _file(tmp_path: Path, text: str, name: str = "prices.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_fine_tune_is_priced_per_kind_of_token_from_the_file(tmp_path: Path) -> None:
    assert lovia.load_prices(_file(tmp_path, PRICES)) == 2
    usage = Usage(
        input_tokens=1_000_000 + 2_000_000 + 4_000_000,  # plain + cache reads + cache writes
        cache_read_tokens=2_000_000,
        cache_write_tokens=4_000_000,
        output_tokens=500_000,
    )
    expected = 3.0 + 2 * 1.5 + 4 * 3.75 + 0.5 * 12.0
    assert price_call("OpenAI", FINETUNE.upper(), usage) == pytest.approx(expected)


def test_a_self_hosted_model_at_zero_is_priced_not_unknown(tmp_path: Path) -> None:
    load_prices(_file(tmp_path, PRICES))
    usage = Usage(input_tokens=10_000, output_tokens=5_000)
    assert price_call("ollama", "llama3.3:70b", usage) == 0.0  # not None: known to be free
    assert has_price("ollama", "qwen3")
    assert price_call("vllm", "llama3.3:70b", usage) is None  # another provider: unknown


def test_an_explicit_zero_in_code_is_priced_too() -> None:
    set_price("local", "mine", input_per_mtok=0, output_per_mtok=0)
    assert price_call("local", "mine", Usage(input_tokens=5, output_tokens=5)) == 0.0


def test_an_exact_model_wins_over_the_provider_wildcard(tmp_path: Path) -> None:
    load_prices(_file(tmp_path, PRICES))
    set_price("ollama", "paid", input_per_mtok=1_000_000, output_per_mtok=0)
    assert price_call("ollama", "paid", Usage(input_tokens=2)) == pytest.approx(2.0)


def test_json_files_and_bare_lists_load(tmp_path: Path) -> None:
    entries = [{"provider": "acme", "model": "m", "input_per_mtok": 1e6, "output_per_mtok": 2e6}]
    load_prices(_file(tmp_path, json.dumps(entries), "p.json"))
    assert price_call("acme", "m", Usage(input_tokens=1, output_tokens=1)) == pytest.approx(3.0)


def test_the_source_names_the_table_or_the_override_set_by_hash(tmp_path: Path) -> None:
    table = price_source("openai", "gpt-4.1-mini")
    assert table is not None and re.fullmatch(r"genai-prices==\S+", table)
    assert price_source("acme", "no-such-model-anywhere") is None
    assert price_table_version() == table
    load_prices(_file(tmp_path, PRICES))
    first = price_source("ollama", "anything")
    assert first is not None and re.fullmatch(r"overrides@[0-9a-f]{8}", first)
    assert price_source("openai", FINETUNE) == first  # one hash for the whole set
    assert price_source("openai", "gpt-4.1-mini") == table  # not overridden: the table
    assert price_table_version() == f"{table}+{first}"
    set_price("acme", "m", input_per_mtok=1.0, output_per_mtok=1.0)
    second = price_source("ollama", "anything")
    assert second != first  # a changed override set is a different source
    clear_prices()
    load_prices(_file(tmp_path, PRICES))
    assert price_source("ollama", "anything") == first  # same set, same hash, any process
    set_price("ollama", "*", input_per_mtok=0.5, output_per_mtok=0)  # same keys, new rate
    assert price_source("ollama", "anything") not in (first, None)


def test_lovia_prices_env_is_read_on_first_pricing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOVIA_PRICES", str(_file(tmp_path, PRICES)))
    assert price_call("ollama", "llama3", Usage(input_tokens=10)) == 0.0
    assert "+overrides@" in price_table_version()
    (tmp_path / "prices.yaml").write_text("prices: []", encoding="utf-8")
    assert price_call("ollama", "llama3", Usage(input_tokens=10)) == 0.0  # read once


def test_a_bad_lovia_prices_file_fails_pricing_loudly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOVIA_PRICES", str(tmp_path / "missing.yaml"))
    with pytest.raises(UserError, match=r"missing\.yaml"):
        price_call("ollama", "llama3", Usage(input_tokens=10))
    with pytest.raises(UserError):  # still failing: never silently the wrong table
        price_table_version()


BAD = [
    ("prices: [", "not valid YAML"),
    ("just text", "no list of prices"),
    ("- 3", "entry 2: expected a mapping"),
    ("- {provider: a, input_per_mtok: 1, output_per_mtok: 1}", "entry 2: 'model' must be"),
    ("- {provider: '', model: m, free: true}", "entry 2: 'provider' must be"),
    ("- {provider: a, model: m, input_per_mtok: 1}", "a:m has no output_per_mtok"),
    (
        "- {provider: a, model: m, free: true}\n- {provider: a, model: m, free: yes please}",
        "entry 3: a:m: 'free' must be",
    ),
    ("- {provider: a, model: m, input_per_mtok: -1, output_per_mtok: 1}", "input_per_mtok is -1"),
    ("- {provider: a, model: m, input_per_mtok: .nan, output_per_mtok: 1}", "input_per_mtok is"),
    ("- {provider: a, model: m, input_per_mtok: '1', output_per_mtok: 1}", "must be a number"),
    ("- {provider: a, model: m, input_per_mtok: true, output_per_mtok: 1}", "must be a number"),
    ("- {provider: a, model: m, input_pre_mtok: 1, output_per_mtok: 1}", "unknown key"),
    ("- {provider: a, model: m, free: true, input_per_mtok: 2}", "is 'free' and has non-zero"),
    (
        "- {provider: a, model: M, free: true}\n- {provider: A, model: m, free: true}",
        "entry 3: A:m is priced twice",
    ),
]


@pytest.mark.parametrize(("text", "said"), BAD)
def test_a_bad_file_names_itself_and_the_entry_and_changes_nothing(
    tmp_path: Path, text: str, said: str
) -> None:
    good = "- {provider: keep, model: me, input_per_mtok: 1, output_per_mtok: 1}\n"
    path = _file(tmp_path, good + text if text.startswith("- ") else text, "contract.yaml")
    set_price("acme", "m", input_per_mtok=1.0, output_per_mtok=1.0)
    before = price_table_version()
    with pytest.raises(UserError) as info:
        load_prices(path)
    assert said in info.value.message and "contract.yaml" in info.value.message
    assert info.value.hint
    assert price_table_version() == before  # nothing applied
    assert not has_price("a", "m") and not has_price("keep", "me")


def test_an_unreadable_or_non_utf8_file_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_bytes(b"- {provider: \xff\xfe, model: m, free: true}\n")
    with pytest.raises(UserError, match=r"p\.yaml"):
        load_prices(path)
    with pytest.raises(UserError, match="cannot read"):
        load_prices(tmp_path / "nowhere.json")
    with pytest.raises(UserError, match="not valid JSON"):
        load_prices(_file(tmp_path, "{'a': 1}", "p.json"))


def test_lovia_prices_is_read_once_so_a_later_set_price_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file is loaded on the first pricing only: a price set in code afterwards is not
    overwritten by the file on the next call."""
    monkeypatch.setenv("LOVIA_PRICES", str(_file(tmp_path, PRICES)))
    assert price_call("ollama", "llama3", Usage(input_tokens=10)) == 0.0
    set_price("ollama", "*", input_per_mtok=1_000_000, output_per_mtok=0)  # the file's key
    assert price_call("ollama", "llama3", Usage(input_tokens=10)) == pytest.approx(10.0)
    assert price_call("ollama", "llama3", Usage(input_tokens=10)) == pytest.approx(10.0)
