"""The block watchdog (acp_green/process/blockwatch.py) in this process: what holds the hub is named,
once per block, and warnings are rate-limited with a count of the ones left out."""

from __future__ import annotations

import logging
import subprocess
import time

import gevent
import pytest

from acp_green.process import blockwatch
from tests.helpers import wait_until

THRESHOLD = 0.1


@pytest.fixture
def watch():
    started = blockwatch.start(THRESHOLD)
    gevent.sleep(0)  # the loop's first turn arms it
    yield started
    started.stop()


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "acp_green.process.blockwatch" and r.levelno == logging.WARNING]


def waits_in_a_library() -> None:
    subprocess.run(["sleep", "0.6"], check=True)  # the stdlib's, not gevent's: it blocks in waitpid


def test_a_block_inside_a_library_names_the_caller_and_where_it_waits(watch, caplog):
    caplog.set_level(logging.WARNING, "acp_green.process.blockwatch")
    waits_in_a_library()
    wait_until(lambda: warnings_of(caplog), 5, "the warning")
    first_line = warnings_of(caplog)[0].splitlines()[0]
    assert "blocked: waits_in_a_library (" in first_line and "test_blockwatch.py:" in first_line, first_line
    assert ", inside " in first_line and "subprocess.py:" in first_line, first_line


def test_one_long_block_is_one_warning(watch, caplog):
    caplog.set_level(logging.WARNING, "acp_green.process.blockwatch")
    time.sleep(1.0)  # ten thresholds
    gevent.sleep(0.3)
    assert len(warnings_of(caplog)) == 1
    assert watch.suppressed == 0


def test_blocks_after_a_warning_are_counted_then_told(watch, caplog, monkeypatch):
    caplog.set_level(logging.WARNING, "acp_green.process.blockwatch")
    monkeypatch.setattr(blockwatch, "REPEAT_EVERY", 1.5)
    time.sleep(0.4)
    gevent.sleep(0.05)  # the loop turns: the next block is a new one
    time.sleep(0.4)
    gevent.sleep(0.05)
    assert len(warnings_of(caplog)) == 1 and watch.suppressed == 1
    gevent.sleep(1.5)
    time.sleep(0.4)
    wait_until(lambda: len(warnings_of(caplog)) == 2, 5, "the second warning")
    assert "(1 more blocks since the last warning were not reported)" in warnings_of(caplog)[1]


def test_an_idle_loop_is_not_a_block(watch, caplog):
    caplog.set_level(logging.WARNING, "acp_green.process.blockwatch")
    gevent.sleep(0.6)
    assert warnings_of(caplog) == []


def test_zero_is_off():
    assert blockwatch.start(0) is None
