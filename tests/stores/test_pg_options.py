"""The PostgreSQL store URL's options: parsed, validated, removed from the DSN."""

from __future__ import annotations

import pytest

from lovia.errors import UserError
from lovia.stores import store
from lovia.stores._pg_options import DEFAULTS, parse_url

pytest.importorskip("asyncpg")


def test_defaults_are_sized_for_many_processes() -> None:
    options = parse_url("postgresql://u@h/db")
    assert options == DEFAULTS.__class__(dsn="postgresql://u@h/db")
    assert (options.pool_min, options.pool_max) == (1, 4)
    assert options.statement_cache_size == 100
    assert options.max_inactive_connection_lifetime == 60.0
    assert options.application_name == "lovia"
    assert options.listen is True
    assert options.command_timeout is None


def test_every_option_is_read_and_removed_and_connection_options_stay() -> None:
    options = parse_url(
        "postgresql://u:pw@h:6432/db?schema=app&pool_min=0&pool_max=2"
        "&statement_cache_size=0&command_timeout=7.5&connect_timeout=3"
        "&max_inactive_connection_lifetime=0&application_name=api-7&listen=off"
        "&sslmode=require&target_session_attrs=read-write"
    )
    assert options.dsn == (
        "postgresql://u:pw@h:6432/db?sslmode=require&target_session_attrs=read-write"
    )
    assert options.schema == "app"
    assert options.pool_kwargs() == {
        "min_size": 0,
        "max_size": 2,
        "statement_cache_size": 0,
        "command_timeout": 7.5,
        "max_inactive_connection_lifetime": 0.0,
        "timeout": 3.0,
    }
    assert options.application_name == "api-7"
    assert options.listen is False


def test_a_larger_pool_min_alone_raises_the_default_pool_max() -> None:
    assert (parse_url("postgresql://h/db?pool_min=8").pool_max) == 8


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("pool_max=0", "pool_max='0'"),
        ("pool_max=ten", "pool_max='ten'"),
        ("pool_min=-1", "pool_min='-1'"),
        ("statement_cache_size=-1", "statement_cache_size='-1'"),
        ("statement_cache_size=", "statement_cache_size=''"),
        ("command_timeout=0", "command_timeout='0'"),
        ("command_timeout=inf", "command_timeout='inf'"),
        ("command_timeout=nan", "command_timeout='nan'"),
        ("max_inactive_connection_lifetime=-5", "max_inactive_connection_lifetime='-5'"),
        ("listen=maybe", "listen='maybe'"),
        ("application_name=", "application_name=''"),
        ("application_name=" + "x" * 64, "application_name="),
        ("application_name=caf%C3%A9", "application_name='café'"),
    ],
)
def test_a_bad_value_is_a_user_error_naming_the_option(query: str, message: str) -> None:
    with pytest.raises(UserError) as caught:
        store(f"postgresql://u@h/db?{query}")
    assert message in caught.value.message
    assert caught.value.hint is not None and query.split("=")[0] in caught.value.hint


@pytest.mark.parametrize("key", ["statment_cache_size", "pool_size", "search_path", "max_size"])
def test_an_unknown_option_is_a_user_error_listing_the_known_ones(key: str) -> None:
    with pytest.raises(UserError, match=f"unknown option '{key}'") as caught:
        store(f"postgresql://u@h/db?{key}=1")
    hint = caught.value.hint or ""
    assert "statement_cache_size" in hint and "pool_max" in hint and "sslmode" in hint


def test_pool_min_above_pool_max_is_a_user_error() -> None:
    with pytest.raises(UserError, match="pool_min=5 is larger than pool_max=2"):
        store("postgresql://u@h/db?pool_min=5&pool_max=2")


def test_the_password_is_not_in_the_error() -> None:
    with pytest.raises(UserError) as caught:
        store("postgresql://u:s3cret@h/db?pool_max=x")
    assert "s3cret" not in str(caught.value)
