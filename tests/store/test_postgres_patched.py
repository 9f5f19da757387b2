"""Under monkey-patching (the default of `acp-green serve`, which patches before psycopg is
imported) the PostgreSQL store's thread connects, queries, waits on the server and reconnects
without a gevent hub of its own, while the hub goes on running. psycopg alone would not: with
`select` patched it waits through gevent's poll (its `wait_poll`), and its connect through gevent's
selector and resolver. Run in a fresh patched interpreter (this test process stays unpatched)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import REPO

PATCHED_STORE = """
import json, sys
from gevent import monkey
monkey.patch_all()
sys.path.insert(0, sys.argv[2])
import gevent
import psycopg
from gevent._hub_local import get_hub_if_exists
from acp_green.store import pg_connection
from acp_green.store.postgres import PostgresDatabase, PostgresOpener, PostgresStore
from acp_green.store.session_record import SessionRecord

if sys.argv[3] == "poll":  # as without psycopg_binary's C module: the store's own wait on the unpatched poll
    pg_connection._wait_function = lambda: pg_connection._wait_poll
native_id = monkey.get_original("_thread", "get_native_id")
calls = []  # (OS thread, a hub exists on it) after each call of the store thread's database

def probed(cls, name):
    original = getattr(cls, name)
    def run(*args, **kwargs):
        try:
            return original(*args, **kwargs)
        finally:
            calls.append((name, native_id(), get_hub_if_exists() is not None))
    setattr(cls, name, run)

for name in ("open",):
    probed(PostgresOpener, name)
for name in ("begin_write", "commit", "save_session", "load_session", "list_sessions", "lock_session", "reconnect"):
    probed(PostgresDatabase, name)

slow = {"on": False}
listed = PostgresDatabase.list_sessions
def slow_list(self, *args, **kwargs):
    if slow["on"]:
        self.conn.execute("SELECT pg_sleep(0.3)")  # a slow server: the store thread waits, the hub must not
    return listed(self, *args, **kwargs)
PostgresDatabase.list_sessions = slow_list

url = sys.argv[1].replace("127.0.0.1", "localhost")  # a host name: resolved without gevent's resolver
store = PostgresStore(url)
ticks = []
def ticker():
    while True:
        ticks.append(1)
        gevent.sleep(0.01)
gevent.spawn(ticker)
store.own_new_session("s")
store.save_session(SessionRecord("s", "/w", title="one"))
store.sync()
gevent.sleep(0.05)
slow["on"] = True
before = len(ticks)
store.list_sessions()
during = len(ticks) - before
slow["on"] = False
# The server ends the store's connection (a restart): the next read reconnects on the store thread.
with psycopg.connect(sys.argv[1], autocommit=True) as admin:  # on the hub: psycopg's own waiting, patched
    admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                  (pg_connection.application_name(),))
loaded = store.load_session("s")
store.close()
print(json.dumps({
    "calls": calls, "main": native_id(), "ticks_during_read": during, "title": loaded.title if loaded else None,
    "patched": monkey.is_module_patched("select"), "psycopg_wait": psycopg.waiting.wait.__name__,
}))
"""


@pytest.mark.parametrize("wait", ["wait_c", "poll"])
def test_the_postgres_store_thread_waits_without_a_hub_of_its_own_under_patching(postgres_url, wait):
    done = subprocess.run([sys.executable, "-c", PATCHED_STORE, postgres_url, str(REPO), wait],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["patched"] and report["psycopg_wait"] == "wait_poll", report  # what psycopg alone would use
    names = {name for name, _thread, _hub in report["calls"]}
    assert {"open", "save_session", "commit", "list_sessions", "lock_session", "reconnect", "load_session"} <= names, names
    threads = {thread for _name, thread, _hub in report["calls"]}
    assert len(threads) == 1 and report["main"] not in threads, report
    assert not any(hub for _name, _thread, hub in report["calls"]), report["calls"]
    assert report["title"] == "one"
    # The read waited >= 0.3 s on the store thread; the hub ran the ticker all that time.
    assert report["ticks_during_read"] >= 10, report
