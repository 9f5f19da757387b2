"""`acp-green trace html` in a real headless Chromium (Debian's package): the DOM after the page's
script ran has the marks of a known three-session trace, a screenshot is taken, a mark selected by
the address (#seq=N) or by a real mouse click shows its message as text, the conversation view
shows every prompt and reply without a click, the summary's errors (the agent's stderr's too) link
to their place, and hostile trace text stays text. CI installs Chromium first (scripts/setup-browser.sh, called by .ci/run); without it
these tests skip locally, saying how to install it, and fail under CI."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import struct
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from acp_green.tools.trace.html import write_html
from tests.trace_samples import HOSTILE, PAYLOADS, Expected, hostile_conversation, long_trace, stderr_errors, three_sessions

WINDOW = (1280, 800)
INSTALL = "install it with scripts/setup-browser.sh (apt-get install -y chromium)"


def chromium() -> str:
    """The browser's path; under CI its absence is a failure, since .ci/run installs it."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"chromium is not installed, and CI must run the browser tests: {INSTALL}")
        pytest.skip(f"chromium is not installed: {INSTALL}")
    return path


def browser_argv(tmp_path: Path, *args: str) -> list[str]:
    # Root (CI) needs --no-sandbox; a profile of its own per test, so parallel browsers do not share one.
    return [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={WINDOW[0]},{WINDOW[1]}", *args]


def run_browser(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(browser_argv(tmp_path, *args), capture_output=True, timeout=90, check=True)


@pytest.fixture
def page(tmp_path: Path) -> tuple[Path, Expected]:
    builder, expected = three_sessions()
    out = tmp_path / "three.html"
    write_html(builder.write(tmp_path / "three.jsonl"), out)
    return out, expected


class Dom(HTMLParser):
    """The elements of a dumped DOM: (tag, attributes), in order."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text: dict[str, list[str]] = {}
        self._open: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        self.elements.append((tag, attributes))
        if tag == "pre" and "data-seq" in attributes:
            self._open.append(attributes["data-seq"])
            self.text[attributes["data-seq"]] = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre" and self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        if self._open:
            self.text[self._open[-1]].append(data)

    def having(self, *classes: str) -> list[dict[str, str]]:
        return [a for _t, a in self.elements if set(classes) <= set(a.get("class", "").split())]

    def tags(self, tag: str) -> list[dict[str, str]]:
        return [a for t, a in self.elements if t == tag]


def dump_dom(tmp_path: Path, page: Path, fragment: str = "") -> Dom:
    done = run_browser(tmp_path, "--dump-dom", page.as_uri() + fragment)
    return Dom(done.stdout.decode("utf-8"))


def test_the_dom_has_a_lane_per_session_and_the_known_marks(tmp_path, page):
    path, expected = page
    dom = dump_dom(tmp_path, path)
    assert dom.tags("body")[0].get("data-rendered") == "true"
    assert [lane["data-session"] for lane in dom.having("lane", "lane-session")] == list(expected.sessions)
    assert len(dom.having("lane", "lane-connection")) == 1
    assert len(dom.having("mark", "bar")) == expected.requests
    assert len(dom.having("mark", "tick", "update")) == expected.updates
    assert len(dom.having("mark", "tick", "cancel")) == expected.cancels
    assert len(dom.having("mark", "bar", "cancelled")) == expected.cancelled
    assert len(dom.having("mark", "bar", "error")) == expected.error_answers
    assert len(dom.having("mark", "bad-line", "error")) == expected.bad_lines
    assert len(dom.having("mark", "bar", "open")) == expected.unanswered
    assert dom.tags("aside")[0].get("hidden") is not None  # nothing selected yet


def test_a_seq_fragment_selects_the_mark_and_shows_its_request_and_answer(tmp_path, page):
    path, _expected = page
    permission_seq = request_seq(path, "session/request_permission", "sess-a")
    dom = dump_dom(tmp_path, path, f"#seq={permission_seq}")
    detail = dom.tags("aside")[0]
    assert "hidden" not in detail and detail["data-seq"] == str(permission_seq)
    [selected] = dom.having("mark", "selected")
    assert selected["data-seq"] == str(permission_seq) and "from-agent" in selected["class"]
    request = json.loads("".join(dom.text[str(permission_seq)]))
    assert request["method"] == "session/request_permission" and request["params"]["sessionId"] == "sess-a"
    [answer_seq] = [seq for seq in dom.text if seq != str(permission_seq)]
    assert json.loads("".join(dom.text[answer_seq]))["result"]["outcome"]["optionId"] == "allow"


def test_hostile_trace_text_is_shown_as_text_and_runs_nothing(tmp_path, page):
    path, expected = page
    dom = dump_dom(tmp_path, path, f"#seq={expected.hostile_seq}")
    assert dom.tags("img") == [] and len(dom.tags("script")) == 2
    shown = json.loads("".join(dom.text[str(expected.hostile_seq)]))
    assert shown["params"]["update"]["content"]["text"] == HOSTILE


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_a_screenshot_of_the_page_is_a_png_of_the_window_size(tmp_path, page):
    path, _expected = page
    shot = tmp_path / "trace.png"
    run_browser(tmp_path, f"--screenshot={shot}", path.as_uri() + "#seq=14")
    data = shot.read_bytes()
    assert png_size(data) == WINDOW
    # A blank window compresses to a few kilobytes; lanes, bars and the detail panel do not.
    assert len(data) > 20_000, len(data)


def above_nine(fd: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return moved


class DevTools:
    """Chromium driven over --remote-debugging-pipe (fd 3 in, fd 4 out; NUL-terminated JSON): no websocket needed."""

    def __init__(self, argv: list[str]) -> None:
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()
        # The browser reads fd 3 and writes fd 4: bash (sh may not take fds above 9) puts our pipe ends there and becomes the browser.
        # Its ends are first moved above 9, so putting one at 3 cannot overwrite the other.
        to_browser, from_browser = (above_nine(fd) for fd in (to_browser, from_browser))
        command = " ".join(["exec", *(f"'{a}'" for a in argv), f"3<&{to_browser}", f"4>&{from_browser}"])
        self.process = subprocess.Popen(["bash", "-c", command], pass_fds=(to_browser, from_browser),
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next = 0
        self.session: str | None = None

    def call(self, method: str, deadline: float = 30.0, **params: Any) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if self.session is not None and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        end = time.monotonic() + deadline
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._next:
                    assert "error" not in reply, reply
                    return reply["result"]
            left = end - time.monotonic()
            assert left > 0 and select.select([self._read], [], [], left)[0], f"no answer to {method}"
            chunk = os.read(self._read, 1 << 16)
            assert chunk, "the browser closed its pipe"
            self._buffer += chunk

    def evaluate(self, expression: str) -> Any:
        reply = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in reply, reply["exceptionDetails"]
        return reply["result"].get("value")

    def wait_for(self, expression: str, deadline: float = 30.0) -> Any:
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"never true: {expression}")

    def open(self, url: str) -> None:
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.navigate", url=url)
        self.wait_for("document.body && document.body.dataset.rendered === 'true'")

    def click(self, selector: str) -> None:
        box = self.evaluate(f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
                            " return [r.left + r.width / 2, r.top + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def close(self) -> None:
        os.close(self._write)
        os.close(self._read)
        self.process.kill()
        self.process.wait(timeout=30)


@pytest.fixture
def devtools(tmp_path: Path):
    browser = DevTools(browser_argv(tmp_path, "--remote-debugging-pipe", "about:blank"))
    try:
        yield browser
    finally:
        browser.close()


def test_clicking_a_mark_shows_its_message_and_puts_it_in_the_address(devtools, page):
    path, _expected = page
    devtools.open(path.as_uri())
    assert devtools.evaluate("document.getElementById('detail').hidden") is True
    devtools.click(".lane-session .mark.bar.error")
    devtools.wait_for("!document.getElementById('detail').hidden")
    shown = devtools.evaluate("[...document.querySelectorAll('#detail pre.message')].map(p => p.textContent)")
    request, answer = (json.loads(text) for text in shown)
    assert request["params"]["sessionId"] == "sess-c" and answer["error"]["code"] == -32603
    assert devtools.evaluate("location.hash") == f"#seq={request_seq(path, 'session/prompt', 'sess-c')}"
    assert devtools.evaluate("document.querySelectorAll('.mark.selected').length") == 1


def request_seq(page: Path, method: str, session: str) -> int:
    events = [json.loads(line) for line in page.with_suffix(".jsonl").read_text().splitlines()]
    return next(e["seq"] for e in events if e.get("method") == method and e.get("session") == session)


def test_a_page_of_ten_thousand_events_renders_every_mark(devtools, tmp_path):
    """Its render time is measured (the page records it) and printed, not asserted: it is a figure for the docs."""
    out = tmp_path / "long.html"
    timeline = write_html(long_trace(10_000).write(tmp_path / "long.jsonl"), out)
    began = time.monotonic()
    devtools.open(out.as_uri())
    loaded = time.monotonic() - began
    assert devtools.evaluate("document.querySelectorAll('.mark').length") == len(timeline.marks)
    print(f"10,000 events: {len(timeline.marks)} marks, script {devtools.evaluate('document.body.dataset.renderMs')} ms,"
          f" navigation to rendered {loaded:.2f} s")


def visible_in_conversation(devtools: DevTools, selector: str) -> list[str]:
    """The text of each element `selector` finds in the conversation, after checking it is drawn and
    readable: scrolled into the conversation's view (no click), the element at its centre is itself."""
    return devtools.evaluate(f"""(() => {{
      const pane = document.getElementById('conversation');
      return [...pane.querySelectorAll({json.dumps(selector)})].map((node) => {{
        node.scrollIntoView({{ block: 'center' }});
        const r = node.getBoundingClientRect(), p = pane.getBoundingClientRect();
        const hit = document.elementFromPoint(r.left + Math.min(r.width / 2, 40), r.top + r.height / 2);
        const seen = node.checkVisibility() && r.width > 100 && r.height >= 10 && r.top >= p.top && r.bottom <= p.bottom
          && hit !== null && (hit === node || node.contains(hit));
        return seen ? node.textContent : 'NOT VISIBLE: ' + node.textContent;
      }});
    }})()""")


def test_the_conversation_shows_every_prompt_and_reply_without_a_click(devtools, page):
    path, expected = page
    devtools.open(path.as_uri())
    devtools.call("Emulation.setDeviceMetricsOverride", width=WINDOW[0], height=WINDOW[1], deviceScaleFactor=1, mobile=False)
    shot = path.parent / "conversation.png"
    shot.write_bytes(base64.b64decode(devtools.call("Page.captureScreenshot", format="png")["data"]))
    print(f"screenshot: {shot}")
    assert png_size(shot.read_bytes()) == WINDOW and shot.stat().st_size > 20_000
    sessions = devtools.evaluate("[...document.querySelectorAll('#conversation .talk-session')].map(s => s.dataset.session)")
    assert sessions == list(expected.sessions)
    # The first prompt is in view as the page opens.
    assert devtools.evaluate("""(() => { const r = document.querySelector('#conversation .entry.prompt .text').getBoundingClientRect();
      return r.top > 0 && r.bottom < innerHeight && r.width > 100; })()""")
    assert visible_in_conversation(devtools, ".entry.prompt .text") == ["read README", "again", "count to 100", "hi"]
    assert visible_in_conversation(devtools, ".entry.reply .text") == ["The README says: project", "Start", "1 2 3 ", "4 ", HOSTILE]
    assert visible_in_conversation(devtools, ".entry.thought .text") == ["reading"]
    assert visible_in_conversation(devtools, ".entry.permission .answer") == ["chose: Allow"]
    ends = visible_in_conversation(devtools, ".entry.end")
    assert [end.split(" · ")[0].split(" (")[0] for end in ends] == [
        "turn ended: end_turn", "the prompt was never answered", "turn ended: cancelled", "the prompt failed: error -32603 Internal error"]


def test_a_time_in_the_conversation_selects_its_mark_on_the_timeline(devtools, page):
    path, _expected = page
    devtools.open(path.as_uri())
    link = '.talk-session[data-session="sess-c"] .entry.prompt a.at'
    devtools.evaluate(f"document.querySelector({json.dumps(link)}).scrollIntoView({{ block: 'center' }})")
    devtools.click(link)
    devtools.wait_for("!document.getElementById('detail').hidden")
    request, answer = (json.loads(text) for text in
                       devtools.evaluate("[...document.querySelectorAll('#detail pre.message')].map(p => p.textContent)"))
    assert request["params"]["prompt"][0]["text"] == "hi" and answer["error"]["code"] == -32603
    assert devtools.evaluate("location.hash") == f"#seq={request_seq(path, 'session/prompt', 'sess-c')}"
    assert devtools.evaluate("document.querySelector('.mark.selected').className") == "mark bar from-client error selected"
    assert devtools.evaluate("document.querySelector('.entry.current .text').textContent") == "hi"


def test_the_summary_counts_the_agents_stderr_errors_and_links_each_to_its_place(devtools, tmp_path):
    builder, seqs = stderr_errors()
    out = tmp_path / "errors.html"
    write_html(builder.write(tmp_path / "errors.jsonl"), out)
    devtools.open(out.as_uri())
    assert " · 3 errors · " in devtools.evaluate("document.querySelector('header .summary').textContent")
    links = devtools.evaluate("[...document.querySelectorAll('header .errors a')].map(a => a.getAttribute('href'))")
    prompt = next(e["seq"] for e in builder.events if e.get("method") == "session/prompt")
    assert links == [f"#seq={prompt}"] + [f"#seq={seq}" for seq in seqs]
    devtools.click(f'header .errors a[href="#seq={seqs[0]}"]')
    devtools.wait_for("!document.getElementById('detail').hidden")
    lines = devtools.evaluate("[...document.querySelectorAll('#detail pre.message')].map(p => p.textContent)")
    assert lines[0] == "acp-green ERROR my_agent: the turn failed" and lines[-1] == "ValueError: no doors" and len(lines) == 5
    assert devtools.evaluate("document.querySelector('.entry.error.current pre').textContent").endswith("ValueError: no doors")


def test_hostile_text_in_the_conversation_is_shown_as_text_and_runs_nothing(devtools, tmp_path):
    out = tmp_path / "hostile.html"
    write_html(hostile_conversation().write(tmp_path / PAYLOADS[4].replace("/", "_")), out)
    devtools.open(out.as_uri())
    assert devtools.evaluate("window.__pwned === undefined && document.scripts.length === 2")
    assert devtools.evaluate("document.querySelectorAll('img, svg, textarea, iframe, object').length") == 0
    assert visible_in_conversation(devtools, ".entry.prompt .text") == [PAYLOADS[0]]
    assert visible_in_conversation(devtools, ".entry.reply .text") == ["".join(PAYLOADS)]
    assert visible_in_conversation(devtools, ".entry.thought .text") == [PAYLOADS[3]]
    assert visible_in_conversation(devtools, ".entry.tool .title") == [PAYLOADS[5] + PAYLOADS[4]]
    assert visible_in_conversation(devtools, ".entry.permission .answer") == ["chose: " + PAYLOADS[0]]
    assert devtools.evaluate("document.querySelector('.talk-session').dataset.session") == PAYLOADS[1]
    assert devtools.evaluate("document.querySelector('.talk-session h2 .session-title').textContent") == PAYLOADS[2]
    assert devtools.evaluate("document.title") == "ACP trace: " + PAYLOADS[4].replace("/", "_")
    # Hovering, focusing and clicking every entry and mark runs nothing either.
    devtools.evaluate("""[...document.querySelectorAll('.entry, .mark')].forEach((n) => {
      for (const kind of ['mouseover', 'focus', 'click']) n.dispatchEvent(new Event(kind, { bubbles: true })); })""")
    assert devtools.evaluate("window.__pwned === undefined && document.scripts.length === 2")
