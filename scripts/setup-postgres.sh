#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server for the tests (tests/postgres_server.py gives each test its own
# database on it) and prints its URL as the last line of stdout, also written to .pg/url:
#   postgresql://acp_green:PASSWORD@127.0.0.1:PORT/postgres
# Installs Debian's `postgresql` package first when no server binaries are found (as root, or through
# sudo); elsewhere set PG_BINDIR to the directory holding initdb, pg_ctl and pg_isready.
# The server is a private cluster of its own (never the system's): superuser acp_green with a random
# password, on 127.0.0.1 at a free port, with its unix socket in its own directory. It is run by the
# `postgres` OS user when this runs as root (PostgreSQL refuses to run as root), else by the current user.
# Run again, it reuses the server when it is up, and starts it again (same data) when it is not.
#   scripts/setup-postgres.sh          start (or reuse) the server; print its URL
#   scripts/setup-postgres.sh --stop   stop it (its data is kept for the next start)
# .pg/ (ignored by git) keeps the URL, the password and the path of the cluster's directory. The cluster
# itself (data and socket) lives in a directory of its own under /tmp, not in the checkout: the
# postgres user can reach it whatever the checkout's permissions, a socket path there is short enough,
# and the tests that copy the checkout (the fresh-install ones) do not copy a live server's files.
set -euo pipefail
cd "$(dirname "$0")/.."
state=$PWD/.pg
mkdir -p "$state"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$state/start.lock"
  # Runs at the same time (two test workers): one starts the server, the other then reuses it.
  flock -w 300 9 || { echo "setup-postgres: another run has held $state/start.lock for 5 minutes" >&2; exit 1; }
fi

# The server's binaries: PG_BINDIR, else the newest Debian one, else initdb on PATH.
find_bindir() {
  if [ -n "${PG_BINDIR:-}" ]; then
    echo "$PG_BINDIR"
    return 0
  fi
  local newest
  newest=$(printf '%s\n' /usr/lib/postgresql/*/bin/pg_ctl | sort -V | tail -n 1)
  if [ -x "$newest" ]; then
    dirname "$newest"
    return 0
  fi
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"
    return 0
  fi
  return 1
}

if [ "${1:-}" = "--stop" ] && { [ ! -s "$state/cluster" ] || [ ! -f "$(cat "$state/cluster")/data/postmaster.pid" ]; }; then
  exit 0  # no server to stop (and nothing to install for that)
fi

if ! bindir=$(find_bindir); then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup-postgres: the PostgreSQL server is not installed and apt-get is not available to install it;" \
         "install it with your system's package manager (and set PG_BINDIR to where its initdb is)" >&2
    exit 1
  fi
  sudo=()
  if [ "$(id -u)" != 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
      echo "setup-postgres: installing postgresql needs root: run 'apt-get install -y postgresql' as root" >&2
      exit 1
    fi
    sudo=(sudo)
  fi
  echo "setup-postgres: installing postgresql (Debian's package) for the tests" >&2
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  bindir=$(find_bindir) || { echo "setup-postgres: apt-get finished but no PostgreSQL server binaries were found" >&2; exit 1; }
fi
for tool in initdb pg_ctl pg_isready; do
  [ -x "$bindir/$tool" ] || { echo "setup-postgres: $bindir/$tool is missing (set PG_BINDIR to the server's bin directory)" >&2; exit 1; }
done

# Who runs the server. Commands run as that user start from / (the checkout may be closed to it).
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || { echo "setup-postgres: running as root, but there is no 'postgres' user to run the server" >&2; exit 1; }
  owner=postgres
  as=(runuser -u postgres --)
else
  owner=$(id -un)
  as=()
fi
# Without the lock's descriptor: the server would inherit it and hold the lock as long as it runs.
as_owner() { (cd / && "${as[@]}" "$@" 9>&-); }

# The cluster's directory: the one recorded in .pg/cluster while it exists, else a new private one.
cluster=""
if [ -s "$state/cluster" ]; then
  cluster=$(cat "$state/cluster")
fi
if [ "${1:-}" = "--stop" ]; then
  if ! as_owner "$bindir/pg_ctl" -D "$cluster/data" status >/dev/null 2>&1; then
    exit 0  # a pid file left by a server that is gone
  fi
  as_owner "$bindir/pg_ctl" -D "$cluster/data" -m fast -w stop >/dev/null
  echo "setup-postgres: stopped the test server (its data is kept in $cluster/data)" >&2
  exit 0
fi
if [ -z "$cluster" ] || [ ! -d "$cluster" ]; then
  cluster=$(mktemp -d /tmp/acp-green-pg.XXXXXX)
  chown "$owner" "$cluster"
  echo "$cluster" >"$state/cluster"
fi
data=$cluster/data
sock=$cluster/sock
log=$cluster/server.log

url_of() { echo "postgresql://acp_green:$(cat "$state/password")@127.0.0.1:$1/postgres"; }
announce() {  # the URL: into .pg/url, and as the last line of stdout
  url_of "$1" >"$state/url"
  chmod 600 "$state/url"
  url_of "$1"
}

# Reuse a running server (its port is the 4th line of postmaster.pid).
if [ -s "$state/password" ] && [ -f "$cluster/initialized" ] && as_owner "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
  port=$(sed -n 4p "$data/postmaster.pid")
  for _ in $(seq 1 120); do
    "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" && break
    sleep 0.5
  done
  if "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port"; then
    announce "$port"
    exit 0
  fi
  echo "setup-postgres: the server in $data runs but does not answer on port $port; restarting it" >&2
  as_owner "$bindir/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
fi

# A new cluster (or one whose initdb did not finish, or whose password was lost): initdb.
if [ ! -f "$cluster/initialized" ] || [ ! -s "$state/password" ]; then
  if [ -f "$data/postmaster.pid" ]; then  # a server of that unfinished or unusable cluster may run
    as_owner "$bindir/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$data" "$sock" "$cluster/initialized"
  (umask 077; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$state/password")
  pwfile=$cluster/pwfile
  (umask 077; cat "$state/password" >"$pwfile"; echo >>"$pwfile")
  chown "$owner" "$pwfile"
  # The bootstrap superuser is acp_green itself, with that password over TCP (scram-sha-256); the
  # socket (in a directory only the server's user and root can enter) trusts, for a quick psql.
  if ! as_owner "$bindir/initdb" -D "$data" -U acp_green --pwfile="$pwfile" --auth-host=scram-sha-256 \
       --auth-local=trust --encoding=UTF8 --no-locale --no-sync >"$cluster/initdb.log" 2>&1; then
    rm -f "$pwfile"
    echo "setup-postgres: initdb failed:" >&2
    tail -n 20 "$cluster/initdb.log" >&2
    exit 1
  fi
  rm -f "$pwfile"
  as_owner mkdir -m 700 "$sock"
  # A throwaway cluster for tests: no crash safety is wanted, so fsync, synchronous commit and
  # full-page writes are off (a crash may lose or corrupt it; the tests' databases are made anew
  # each run). 300 connections: the suite runs in parallel (pytest-xdist) and a test may open several.
  cat >>"$data/postgresql.conf" <<EOF

# acp_green's test cluster (scripts/setup-postgres.sh): throwaway, so fast rather than crash-safe.
listen_addresses = '127.0.0.1'
unix_socket_directories = '$sock'
max_connections = 300
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
  touch "$cluster/initialized"
fi

# Start it on a free port (another program may take the port first: then try another).
free_port() {
  "${PYTHON:-python3}" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
started=""
for _ in 1 2 3; do
  port=$(free_port)
  if as_owner "$bindir/pg_ctl" -D "$data" -l "$log" -o "-p $port" -w -t 60 start >/dev/null; then
    started=1
    break
  fi
done
if [ -z "$started" ]; then
  echo "setup-postgres: the server did not start; the end of its log ($log):" >&2
  tail -n 20 "$log" >&2 || true
  exit 1
fi
for _ in $(seq 1 120); do
  "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" && break
  sleep 0.5
done
if ! "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port"; then
  echo "setup-postgres: the server started but does not accept connections on 127.0.0.1:$port; its log: $log" >&2
  exit 1
fi
echo "setup-postgres: test server up on 127.0.0.1:$port (data in $data)" >&2
announce "$port"
