"""The plugin's client keeps the last lines that passed, not every one: a turn whose agent floods
500 MB costs the test a bounded amount of memory, and every line is still judged (each is handed to
the rig's checker before it is dropped), the turn read back from the lines kept."""

from __future__ import annotations

import sys

from acp_green.testing.serving import KEPT_RECORDS

DEMO = [sys.executable, "-m", "acp_green", "serve", "--ephemeral"]
CHUNKS, CHUNK = 5000, 100_000  # 500 MB in one turn


def rss_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def test_a_turn_that_floods_500_mb_costs_the_test_a_bounded_memory_and_is_judged_whole(acp_connect):
    client = acp_connect(DEMO, timeout=600)
    session = client.new_session()
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # the peak RSS (VmHWM) starts again from here
    before = rss_kib("VmRSS")
    turn = client.prompt(session, f"/stream {CHUNKS} {CHUNK}")
    grown = (rss_kib("VmHWM") - before) << 10
    assert turn.stop_reason == "end_turn"
    assert grown < 3 * KEPT_RECORDS, f"the test's peak RSS grew by {grown >> 20} MiB while 500 MB passed"  # 1.4 GB before
    assert turn.dropped > CHUNKS * 9 // 10  # read back from the lines kept: the last ones
    last = f"{CHUNKS - 1}:"
    assert turn.text.endswith(last + "." * (CHUNK - len(last)))
    # When the test returns, the plugin checks the whole turn: the /stream grammar's 5000 chunks in
    # order (prompt_updates_in_order counts every one), which it can only do if none was dropped unchecked.
