"""Agents written as the README's reader would write them, with plain blocking calls and no
gevent in sight: served with `--agent tests.blocking_agents:NAME` (tests/cli/test_blocking_agents.py).
"""

from __future__ import annotations

import os
import time

from acp_green import Agent, Turn


class SleepingAgent(Agent):
    """`sleep`: says "sleeping", then `time.sleep(3)` (blocking unless patched), then "awake".
    `spin`: a busy loop of 1.5 s. `wait`: says "waiting" and waits for cancellation. Anything
    else ends at once."""

    name = "sleeping"

    def prompt(self, turn: Turn) -> str:
        if turn.text == "sleep":
            turn.say("sleeping")
            time.sleep(3)
            turn.say("awake")
            return "end_turn"
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
