"""Agents written as the README's reader would write them, with plain blocking calls and no
gevent in sight: served with `--agent tests.blocking_agents:NAME` (tests/cli/test_blocking_agents.py).
"""

from __future__ import annotations

import os
import subprocess
import time

from acp_green import Agent, Turn


class SleepingAgent(Agent):
    """`sleep`: says "sleeping", then `time.sleep(3)` (blocking unless patched), then "awake";
    `long sleep`: the same with `time.sleep(60)`. `spin`: a busy loop of 1.5 s. `wait`: says
    "waiting" and waits for cancellation; `tidy`: the same, then 0.2 s of tidying up before it
    says "tidied". `retry`: three tries of `time.sleep(20)` in a loop that catches Exception.
    `greet`: says "hi there". `child PIDFILE`: `subprocess.run` of a shell that writes its pid to PIDFILE
    and sleeps 60 s. Anything else ends at once."""

    name = "sleeping"

    def prompt(self, turn: Turn) -> str:
        if turn.text == "sleep":
            turn.say("sleeping")
            time.sleep(3)
            turn.say("awake")
            return "end_turn"
        if turn.text == "long sleep":
            turn.say("sleeping")
            time.sleep(60)
            turn.say("awake")
            return "end_turn"
        if turn.text.startswith("child "):
            turn.say("starting")
            subprocess.run(["sh", "-c", f'echo $$ > "{turn.text[6:]}"; exec sleep 60'], check=True)
            return "end_turn"
        if turn.text == "retry":  # a retry loop that catches Exception, as HTTP clients' do
            turn.say("trying")
            for _attempt in range(3):
                try:
                    time.sleep(20)
                    break
                except Exception:
                    turn.say(" again")
            return "end_turn"
        if turn.text == "greet":
            turn.say("hi there")
            return "end_turn"
        if turn.text == "tidy":
            turn.say("waiting")
            turn.wait_cancelled()
            time.sleep(0.2)
            turn.say("tidied")
            return "cancelled"
        if turn.text == "spin":  # CPU work: holds the loop even when patched
            deadline = time.perf_counter() + 1.5
            while time.perf_counter() < deadline:
                pass
            return "end_turn"
        if turn.text == "wait":
            turn.say("waiting")
            turn.wait_cancelled()
            return "cancelled"
        return "end_turn"


class OpenAIStreamingAgent(Agent):
    """Streams the model's reply with the official `openai` client (sync, `stream=True`) from
    OPENAI_BASE_URL. A cancel closes the response (`turn.token.on_cancel`), even while the read
    waits for a chunk that does not come; the turn then answers `cancelled`."""

    name = "openai-streaming"

    def prompt(self, turn: Turn) -> str:
        from openai import OpenAI

        client = OpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key="sk-test", max_retries=0)
        stream = client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": turn.text}], stream=True)
        stop_watching = turn.token.on_cancel(stream.close)
        try:
            for chunk in stream:
                if turn.cancelled:
                    break
                if chunk.choices and chunk.choices[0].delta.content:
                    turn.say(chunk.choices[0].delta.content)
        except Exception:
            if not turn.cancelled:
                raise  # closed under the read by the cancel: expected; anything else is not
        finally:
            stop_watching()
            stream.close()
        return "cancelled" if turn.cancelled else "end_turn"


def _chat_body(text: str) -> dict[str, object]:
    return {"model": "fake-model", "messages": [{"role": "user", "content": text}], "stream": True}


def _delta(line: str) -> str:
    """The text of one `data:` line of a chat-completions event stream ("" for anything else)."""
    import json

    if not line.startswith("data: ") or line == "data: [DONE]":
        return ""
    choices = json.loads(line[6:]).get("choices") or [{}]
    return choices[0].get("delta", {}).get("content") or ""


class ModelCallAgent(Agent):
    """The README's cancel recipe, once per HTTP library: a plain streaming call to the model at
    OPENAI_BASE_URL, each chunk said as it comes, `turn.cancelled` checked between chunks, and no
    cancel callback. The prompt is `LIBRARY MESSAGE` (urllib, requests, httpx or openai); the
    model hears MESSAGE (`/silent`: one chunk, then a read that blocks)."""

    name = "model-call"

    def prompt(self, turn: Turn) -> str:
        library, _, message = turn.text.partition(" ")
        url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
        for text in getattr(self, f"_{library}")(url, message):
            if turn.cancelled:
                return "cancelled"
            if text:
                turn.say(text)
        return "end_turn"

    @staticmethod
    def _urllib(url: str, message: str):  # type: ignore[no-untyped-def]
        import json
        import urllib.request

        request = urllib.request.Request(url, json.dumps(_chat_body(message)).encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(request) as response:
            for raw in response:
                yield _delta(raw.decode().strip())

    @staticmethod
    def _requests(url: str, message: str):  # type: ignore[no-untyped-def]
        import requests

        with requests.post(url, json=_chat_body(message), stream=True, timeout=60) as response:
            for line in response.iter_lines(decode_unicode=True):
                yield _delta(line)

    @staticmethod
    def _httpx(url: str, message: str):  # type: ignore[no-untyped-def]
        import httpx

        with httpx.stream("POST", url, json=_chat_body(message), timeout=60) as response:
            for line in response.iter_lines():
                yield _delta(line)

    @staticmethod
    def _openai(url: str, message: str):  # type: ignore[no-untyped-def]
        from openai import OpenAI

        client = OpenAI(base_url=url.rsplit("/chat/completions", 1)[0], api_key="sk-test")
        with client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": message}],
                                            stream=True) as stream:
            for chunk in stream:
                yield chunk.choices[0].delta.content if chunk.choices else ""
