"""`acp-green trace html` on any text: whatever strings a trace holds in its ids, titles and texts
(any JSON can carry: lone surrogates, control characters, markup), the page is valid UTF-8 with the
same skeleton, and its data shows each string (a lone surrogate as its escape, \\udXXX)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.tools.trace.html import build_timeline, load_events, render_page
from tests.trace_samples import TraceBuilder

#: Any string JSON can represent: every code point, lone surrogates included (drawn often: any character
#: draws one rarely), and the characters and tags that matter to HTML, JSON in a script and JavaScript.
CHARACTER = st.one_of(st.characters(exclude_categories=()), st.characters(categories=["Cs"]),
                      st.sampled_from("<>&/\\\"'\u2028\u2029\x00\x1b"),
                      st.sampled_from(["</script>", "<script>", "<!--", "</textarea>", "<img src=x onerror=alert(1)>"]))
TEXT = st.lists(CHARACTER, max_size=24).map("".join)
SKELETON = ["html", "head", "meta", "meta", "meta", "title", "style", "body", "header", "div", "section", "div", "main", "div",
            "aside", "p", "script", "script"]


class Tags(HTMLParser):
    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.tags.append(tag)


def escaped(text: str) -> str:
    """A string as the page shows it: each lone surrogate written \\udXXX."""
    return re.sub("[\ud800-\udfff]", lambda found: f"\\u{ord(found.group()):04x}", text)


def shown(text: str) -> str:
    """A string of the trace as the page shows it: as the trace's JSON holds it (a high and a low surrogate
    in a row are one character there), escaped."""
    return escaped(json.loads(json.dumps(text)))


def trace_of(sid: str, rid: str, title: str, text: str) -> TraceBuilder:
    t = TraceBuilder()
    t.request("client", rid, "session/new", {"cwd": text, "mcpServers": []})
    t.answer("agent", rid, {"sessionId": sid})
    t.request("client", text, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
    t.notify("agent", "session/update", {"sessionId": sid, "update": {"sessionUpdate": "session_info_update", "title": title}})
    t.notify("agent", "session/update", {"sessionId": sid, "update": {"sessionUpdate": "tool_call", "toolCallId": rid, "title": title,
                                                                      "status": text}})
    t.request("agent", rid, "session/request_permission", {"sessionId": sid, "toolCall": {"toolCallId": rid},
                                                           "options": [{"optionId": rid, "name": title, "kind": "allow_once"}]})
    t.answer("client", rid, {"outcome": {"outcome": "selected", "optionId": rid}})
    t.update(sid, "agent_message_chunk", text)
    t.update(sid, "agent_thought_chunk", title)
    t.note("agent", "info", text)
    t.note("agent", "info", "ERROR " + title)
    t.fail("agent", text, -32603, title)
    return t


@settings(max_examples=60, deadline=None)
@given(sid=TEXT, rid=TEXT, title=TEXT, text=TEXT, name=TEXT)
def test_any_strings_in_ids_titles_and_texts_render_to_a_valid_page(sid, rid, title, text, name):
    with TemporaryDirectory() as directory:
        path = trace_of(sid, rid, title, text).write(Path(directory) / "t.jsonl")
        page = render_page(build_timeline(load_events(path)), name)
    page.encode("utf-8")  # valid UTF-8: no surrogate left
    assert Tags(page).tags == SKELETON
    data = json.loads(re.search(r'id="trace-data">(.*?)</script>', page, re.S).group(1))
    assert data["title"] == escaped(name) and data["lanes"][1]["session"] == shown(sid)
    section = data["conversation"][1]
    assert section["title"] == shown(title)
    by_kind = {entry["k"]: entry for entry in section["entries"]}
    assert by_kind["prompt"]["text"] == by_kind["reply"]["text"] == shown(text)
    assert by_kind["tool"]["title"] == by_kind["thought"]["text"] == shown(title)
    assert by_kind["permission"]["answer"] == shown(title) or not title  # an option without a name is named by its id
    assert by_kind["end"]["outcome"] == "error"
