"""Under monkey-patching (the default of `acp-green serve`) the store's thread and the stderr
sink's thread stay real OS threads: a slow SQLite statement or a stuck stderr holds its own
thread, never the hub. Run in a fresh patched interpreter (this test process stays unpatched)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import REPO

PATCHED_STORE = """
import json, sys
from gevent import monkey
monkey.patch_all()
sys.path.insert(0, sys.argv[2])
import gevent
from acp_green.store.sqlite import SqliteStore

native_id = monkey.get_original("_thread", "get_native_id")
real_sleep = monkey.get_original("time", "sleep")
slow = {"on": False}
threads = set()

def trace(sql):
    threads.add(native_id())
    if slow["on"] and sql.lstrip().upper().startswith("SELECT"):
        real_sleep(0.1)  # a slow disk: the OS thread sleeps, the hub must not

store = SqliteStore(sys.argv[1], trace=trace)
ticks = []
def ticker():
    while True:
        ticks.append(1)
        gevent.sleep(0.01)
gevent.spawn(ticker)
gevent.sleep(0.05)
slow["on"] = True
before = len(ticks)
store.list_sessions()
during = len(ticks) - before
slow["on"] = False
store.close()
print(json.dumps({"store_threads": sorted(threads), "main": native_id(), "ticks_during_read": during,
                  "patched": monkey.is_module_patched("threading")}))
"""

PATCHED_SINK = """
import fcntl, json, os, sys
from gevent import monkey
monkey.patch_all()
sys.path.insert(0, sys.argv[1])
import gevent
from acp_green.process.stderrsink import StderrSink

read_end, write_end = os.pipe()  # nobody reads it: the sink's thread blocks in write(2)
fcntl.fcntl(write_end, 1031, 4096)  # F_SETPIPE_SZ: one page
sink = StderrSink(write_end, capacity=1 << 20)
for _ in range(64):
    sink.write(b"x" * 1024)
ticks = []
def ticker():
    while True:
        ticks.append(1)
        gevent.sleep(0.01)
gevent.spawn(ticker)
flushed = sink.flush(timeout=0.3)
print(json.dumps({"flushed": flushed, "ticks": len(ticks)}))
os._exit(0)  # the sink's thread is still stuck in write(2)
"""


def test_the_store_thread_is_a_real_os_thread_under_patching(tmp_path):
    done = subprocess.run([sys.executable, "-c", PATCHED_STORE, str(tmp_path / "state.db"), str(REPO)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["patched"]
    assert report["store_threads"] and report["main"] not in report["store_threads"], report
    # The read waited >= 0.1 s on the store thread; the hub ran the ticker all that time.
    assert report["ticks_during_read"] >= 3, report


def test_the_stderr_sink_thread_blocks_alone_under_patching():
    """A sink whose pipe is full: its thread waits in write(2) while the hub runs a ticker."""
    done = subprocess.run([sys.executable, "-c", PATCHED_SINK, str(REPO)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["flushed"] is False  # the pipe really is stuck
    assert report["ticks"] >= 10, report


PATCHED_BUSY_RETRY = """
import json, sqlite3, sys
from gevent import monkey
monkey.patch_all()
sys.path.insert(0, sys.argv[2])
import gevent
from gevent._hub_local import get_hub_if_exists
from acp_green.store import statedb
from acp_green.store.sqlite import SqliteStore
from acp_green.store.session_record import SessionRecord

statedb.BUSY_TIMEOUT_MS = 50
hubs = []
def trace(sql):  # on the store thread: did a patched sleep start a hub of its own there?
    hubs.append(get_hub_if_exists() is not None)

store = SqliteStore(sys.argv[1], trace=trace)
locker = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)
locker.execute("BEGIN EXCLUSIVE")
store.save_session(SessionRecord("s", "/tmp"))
gevent.sleep(0.4)  # the store thread meets the lock and retries, sleeping between attempts
locker.execute("ROLLBACK")
store.sync()
store.close()
print(json.dumps({"degraded": store.degraded, "hub_on_store_thread": any(hubs), "statements": len(hubs)}))
"""


def test_the_store_threads_busy_retry_sleeps_without_a_hub_of_its_own(tmp_path):
    done = subprocess.run([sys.executable, "-c", PATCHED_BUSY_RETRY, str(tmp_path / "state.db"), str(REPO)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert not report["degraded"] and report["statements"] > 0, report
    assert not report["hub_on_store_thread"], report
