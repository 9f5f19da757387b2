"""Run an agent command and log every line crossing its stdio, for schema checks of SDK-driven runs.

usage: python tee_agent.py LOGFILE -- COMMAND...
Each log line is "in <json>" (agent -> client) or "out <json>" (client -> agent).
"""

from __future__ import annotations

import subprocess
import sys
import threading


def main() -> int:
    log_path = sys.argv[1]
    command = sys.argv[sys.argv.index("--") + 1 :]
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    lock = threading.Lock()
    log = open(log_path, "wb")

    def record(tag: bytes, line: bytes) -> None:
        with lock:
            log.write(tag + b" " + line.rstrip(b"\n") + b"\n")
            log.flush()

    def pump_in() -> None:
        for line in sys.stdin.buffer:
            record(b"out", line)
            child.stdin.write(line)
            child.stdin.flush()
        child.stdin.close()

    threading.Thread(target=pump_in, daemon=True).start()
    for line in child.stdout:
        record(b"in", line)
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
