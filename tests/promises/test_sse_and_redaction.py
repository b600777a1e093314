"""Server-sent events decode the same however the network cuts the bytes; secrets never
survive into an excerpt."""

from __future__ import annotations

import pytest

from lovia import _redact
from lovia._redact import MASK, excerpt, redact, redact_error, redact_url, remember
from lovia.errors import ProviderError
from lovia.providers._sse import ChunkDecoder, SSEDecoder, SSEEvent, iter_sse

STREAM = 'event: delta\r\ndata: {"a": 1}\r\n\r\ndata: second\r\nid: 7\r\n\r\n'
EXPECTED = [SSEEvent("delta", '{"a": 1}'), SSEEvent("message", "second", "7")]


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_a_crlf_stream_cut_anywhere_decodes_to_the_same_events(cut: int) -> None:
    """A CRLF split across two chunks must not eat the first character of the next line."""
    assert iter_sse([STREAM[:cut], STREAM[cut:]]) == EXPECTED


def test_every_byte_its_own_chunk_decodes_the_same() -> None:
    assert iter_sse([c.encode() for c in STREAM]) == EXPECTED


def test_cr_alone_ends_a_line_too() -> None:
    assert iter_sse(["data: x\rdata: y\r\r"]) == [SSEEvent("message", "x\ny")]


def test_a_split_crlf_followed_by_data_keeps_the_data_whole() -> None:
    decoder = SSEDecoder()
    assert decoder.feed("data: abc\r") == []
    assert decoder.feed("\ndata: def\n\n") == [SSEEvent("message", "abc\ndef")]


def test_a_cr_chunk_not_followed_by_lf_keeps_the_next_chunk_whole() -> None:
    decoder = SSEDecoder()
    assert decoder.feed("data: abc\r") == []
    assert decoder.feed("data: def\r\r") == [SSEEvent("message", "abc\ndef")]


def test_multibyte_characters_split_across_chunks_are_joined() -> None:
    body = "data: héllo ✓\n\n".encode()
    cut = body.index("✓".encode()) + 1
    assert iter_sse([body[:cut], body[cut:]]) == [SSEEvent("message", "héllo ✓")]


def test_invalid_utf8_becomes_replacement_characters_not_an_error() -> None:
    assert iter_sse([b"data: a\xffb\n\n"]) == [SSEEvent("message", "a\ufffdb")]


def test_fields_comments_and_data_without_space() -> None:
    text = ": keep-alive\nevent:custom\ndata:tight\ndata:  two spaces\nretry: 10\n\n"
    assert iter_sse([text]) == [SSEEvent("custom", "tight\n two spaces")]


def test_a_bare_data_line_is_an_empty_data_field_as_the_standard_says() -> None:
    assert iter_sse(["data\n\n"]) == [SSEEvent("message", "")]
    assert iter_sse(["data:\n\n"]) == [SSEEvent("message", "")]


def test_event_name_resets_after_each_dispatch() -> None:
    text = "event: a\ndata: 1\n\ndata: 2\n\n"
    assert iter_sse([text]) == [SSEEvent("a", "1"), SSEEvent("message", "2")]


def test_an_event_with_no_data_is_not_dispatched_and_forgets_its_name() -> None:
    assert iter_sse(["event: lonely\n\ndata: x\n\n"]) == [SSEEvent("message", "x")]


def test_a_stream_ending_without_blank_line_still_dispatches() -> None:
    assert iter_sse(["data: tail"]) == [SSEEvent("message", "tail")]
    decoder = ChunkDecoder()
    assert decoder.feed(b"data: a\n") == []
    assert decoder.end() == [SSEEvent("message", "a")]


LIMIT_MESSAGE = "A server-sent event grew past 10 characters; the stream was stopped."
LIMIT_HINT = (
    "The server sends an endless or enormous line. If such events are expected, "
    "raise StreamLimits(max_event_size=...) on the provider."
)


def test_an_endless_line_is_stopped_at_the_size_limit() -> None:
    decoder = SSEDecoder(max_event_size=10)
    assert decoder.feed("data: 123") == []
    with pytest.raises(ProviderError) as info:
        decoder.feed("45")
    assert info.value.code == "event_too_large"
    assert info.value.message == LIMIT_MESSAGE
    assert info.value.hint == LIMIT_HINT


def test_many_data_lines_are_stopped_at_the_size_limit() -> None:
    decoder = SSEDecoder(max_event_size=10)
    decoder.feed("data: 123456\n")
    with pytest.raises(ProviderError):
        decoder.feed("data: 123456\n")


def test_an_unfinished_line_exactly_at_the_limit_passes_on_a_fresh_decoder() -> None:
    decoder = SSEDecoder(max_event_size=9)
    assert decoder.feed("data: 123") == []  # 9 characters held: at the limit, not past it
    assert decoder.feed("\n\n") == [SSEEvent("message", "123")]


def test_pending_data_exactly_at_the_limit_passes() -> None:
    decoder = SSEDecoder(max_event_size=10)
    assert decoder.feed("data: 1234567890\n") == []  # 10 characters pending, not yet sent
    assert decoder.feed("\n") == [SSEEvent("message", "1234567890")]


def test_the_size_count_restarts_after_each_event() -> None:
    decoder = SSEDecoder(max_event_size=10)
    for _ in range(5):
        assert decoder.feed("data: 1234567890\n") == []
        assert decoder.feed("\n") == [SSEEvent("message", "1234567890")]


def test_a_line_arriving_in_many_pieces_is_joined_at_the_end_of_the_stream() -> None:
    decoder = SSEDecoder()
    for piece in ("data: a", "b", "c"):
        assert decoder.feed(piece) == []
    assert decoder.flush() == [SSEEvent("message", "abc")]
    assert decoder.flush() == []


def test_a_body_cut_inside_a_character_ends_with_a_replacement_character() -> None:
    decoder = ChunkDecoder()
    assert decoder.feed(b"data: a\xe2\x82") == []
    assert decoder.end() == [SSEEvent("message", "a\ufffd")]


def test_data_that_is_not_json_is_a_clear_stream_interruption() -> None:
    from lovia.errors import StreamInterrupted
    from lovia.providers._sse import parse_event_json

    junk = "x" * 300
    with pytest.raises(StreamInterrupted) as info:
        parse_event_json(SSEEvent("message", junk), "acme")
    err = info.value
    assert (
        err.message
        == f"acme sent a malformed event in the response stream (not JSON: {'x' * 120 + '…'!r})."
    )
    assert err.hint == (
        "The stream is corrupt; retry the call. If it keeps happening, the server or a "
        "proxy in between is mangling server-sent events."
    )
    assert err.provider == "acme" and err.code == "malformed_event"


@pytest.mark.parametrize("data", ["[1, 2]", "3", '"text"', "null"])
def test_json_that_is_not_an_object_is_a_clear_stream_interruption(data: str) -> None:
    from lovia.errors import StreamInterrupted
    from lovia.providers._sse import parse_event_json

    with pytest.raises(StreamInterrupted) as info:
        parse_event_json(SSEEvent("message", data), "acme")
    err = info.value
    assert err.message == f"acme sent an event that is not a JSON object: {data!r}."
    assert err.hint == "The stream is corrupt; retry the call."
    assert err.provider == "acme" and err.code == "malformed_event"


def test_a_json_object_is_returned_as_parsed() -> None:
    from lovia.providers._sse import parse_event_json

    assert parse_event_json(SSEEvent("message", '{"a": [1, {"b": null}]}'), "p") == {
        "a": [1, {"b": None}]
    }


def test_a_long_non_object_is_excerpted_to_120_characters() -> None:
    from lovia.errors import StreamInterrupted
    from lovia.providers._sse import parse_event_json

    data = "[" + "1," * 200 + "1]"
    with pytest.raises(StreamInterrupted) as info:
        parse_event_json(SSEEvent("message", data), "acme")
    assert repr(data[:120] + "…") in info.value.message


# -- redaction -------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _no_key_configured_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a fresh process would: no key remembered, no pattern built (so
    a key a test remembers is new even when the same test ran before in this process)."""
    monkeypatch.setattr(_redact, "_known", {})
    monkeypatch.setattr(_redact, "_pattern", None)


def test_excerpt_of_empty_text_is_empty() -> None:
    assert excerpt("", 10) == ""
    assert redact("") == ""


def test_excerpt_cuts_with_an_ellipsis_only_when_longer() -> None:
    assert excerpt("abcdef", 6) == "abcdef"
    assert excerpt("abcdefg", 6) == "abcdef…"


def test_a_key_is_masked_before_the_cut_so_no_prefix_survives() -> None:
    key = "lv-test-" + "Q" * 40
    remember(key)
    text = "error for key " + key
    cut = excerpt(text, len("error for key ") + 12)
    assert "lv-test-" not in cut
    assert cut.startswith("error for key " + MASK)


def test_a_configured_key_is_masked_whole_and_by_its_prefix() -> None:
    key = "zz-secret-" + "k" * 30
    remember(key)
    assert redact(f"a {key} b") == f"a {MASK} b"
    assert redact(f"echo {key[:12]}") == f"echo {MASK}"


def test_short_local_keys_are_not_treated_as_secrets() -> None:
    remember("ollama")
    assert redact("ollama runs locally") == "ollama runs locally"


def test_key_shapes_are_masked_even_when_never_configured() -> None:
    assert redact("sk-proj-" + "a" * 20) == MASK
    assert redact("Authorization: Bearer abcdefghijkl") == f"Authorization: Bearer {MASK}"
    assert redact('"x-api-key": "abcdefghijkl"') == f'"x-api-key": "{MASK}"'
    assert redact("api_key=abcdefghijkl&x=1") == f"api_key={MASK}&x=1"


def test_a_key_configured_after_earlier_redactions_is_masked_too() -> None:
    """The compiled pattern is rebuilt when a new key is remembered."""
    assert redact("warm the pattern up") == "warm the pattern up"
    key = "late-key-" + "x" * 30
    remember(key)
    assert redact(f"got {key}") == f"got {MASK}"


def test_a_key_of_exactly_eight_characters_is_a_secret_and_seven_is_not() -> None:
    remember("Qz8#kL2p")
    remember("Wx7!mN3")
    assert redact("keys Qz8#kL2p and Wx7!mN3") == f"keys {MASK} and Wx7!mN3"


def test_no_key_and_an_empty_key_are_ignored() -> None:
    remember(None)
    remember("")
    assert redact("nothing to hide here") == "nothing to hide here"


def test_a_key_with_a_separator_in_it_is_masked_whole_not_by_its_prefix() -> None:
    """A configured key is matched whole first, so even a comma or quote inside it (where
    a key-shaped match would stop) does not leave its tail behind."""
    key = "Rk9vLm2x,tail-of-the-key"
    remember(key)
    assert redact(f"bad key {key}!") == f"bad key {MASK}!"


def test_the_longer_of_two_keys_sharing_a_start_is_masked_whole() -> None:
    short, long = "Ts4pWq8n;one", "Ts4pWq8n;one;two-three"
    remember(short)
    remember(long)
    assert redact(f"[{long}] [{short}]") == f"[{MASK}] [{MASK}]"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("cannot reach postgresql://app:hunter22@db/x", "cannot reach postgresql://app:***@db/x"),
        ("dsn: host=db password=hunter22", "dsn: host=db password=***"),
        ("retrying https://h/v1?token=tk-99887766", "retrying https://h/v1?token=***"),
    ],
)
def test_url_and_connection_string_secrets_are_masked_in_any_text(text: str, shown: str) -> None:
    """A URL without any ``=`` or a ``key=value`` string without any ``://`` is still
    scrubbed: either one is enough to look for URL secrets."""
    assert redact(text) == shown


def test_redacting_an_error_reaches_every_exception_of_its_chain_once() -> None:
    """Cause and context both, however they link back (a cycle does not hang); messages,
    hints, string arguments and notes are masked, other arguments are kept as they are."""
    key = "Cc3vBn7m-chain-secret"
    remember(key)
    cause, context = ValueError(f"cause {key}", 42), KeyError(f"context {key}")
    top = ProviderError(f"top {key}", None)
    top.__cause__, top.__context__ = cause, context
    context.__context__ = top  # a cycle
    cause.add_note(f"note {key}")
    cause.__notes__.append(7)  # pyright: ignore[reportArgumentType] -- notes may be anything
    assert redact_error(top) is top
    assert (top.message, top.hint) == (f"top {MASK}", None)
    assert cause.args == (f"cause {MASK}", 42)
    assert context.args == (f"context {MASK}",)
    assert cause.__notes__ == [f"note {MASK}", 7]


def test_redacting_an_error_masks_its_hint() -> None:
    key = "Hh5jKl9p-hint-secret"
    remember(key)
    error = redact_error(ProviderError("failed", f"check {key}"))
    assert isinstance(error, ProviderError) and error.hint == f"check {MASK}"


def test_redact_url_masks_only_the_url_secrets() -> None:
    """A configured key elsewhere in the text is left to :func:`redact`; an empty URL
    stays empty."""
    key = "Uu2iOp6q-url-secret"
    remember(key)
    url = f"https://u:pw-123@h/x?token=t0k&q={key}"
    assert redact_url(url) == f"https://u:***@h/x?token=***&q={key}"
    assert redact_url("") == ""
