"""Usage sizes: a usage record's input and output sizes are UTF-8 bytes, not
characters (S16 records them); text with lone surrogates, which JSON input may carry, counts too."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.demo import DemoAgent
from acp_green.usage import utf8_size


def test_non_ascii_prompt_and_reply_are_counted_in_utf8_bytes_S16(inprocess):
    """"héllo €" is 7 characters and 10 bytes; the demo echoes it, and its pretend token count
    (one per four bytes) follows the bytes."""
    harness = inprocess(DemoAgent())
    client = harness.client
    client.initialize()
    sid = client.new_session()
    assert client.prompt(sid, "héllo €").result() == {"stopReason": "end_turn"}
    [record] = harness.server.store.usage(sid)
    assert (record.input_bytes, record.output_bytes) == (10, 10)
    assert (record.input_tokens, record.output_tokens) == (3, 3)


def test_a_lone_surrogate_in_the_prompt_is_counted_not_fatal_S16(inprocess):
    """`/plan` ignores its argument; the prompt's text holds an unpaired surrogate (3 bytes)."""
    harness = inprocess(DemoAgent())
    client = harness.client
    client.initialize()
    sid = client.new_session()
    assert client.prompt(sid, "/plan \ud800").result() == {"stopReason": "end_turn"}
    [record] = harness.server.store.usage(sid)
    assert record.input_bytes == len("/plan ") + 3
    assert record.output_bytes == len("plan complete")


# Any character, lone surrogates included (st.characters() rarely draws those by itself).
ANY_CHARACTER = st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr))


@settings(deadline=None, max_examples=200)
@given(st.text(alphabet=ANY_CHARACTER))
def test_utf8_size_is_the_encoded_length_for_any_text(text: str) -> None:
    assert utf8_size(text) == len(text.encode("utf-8", "surrogatepass"))
