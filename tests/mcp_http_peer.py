"""A real MCP server over streamable HTTP for the tests: tests/mcp_servers/http_tools.py in a child
process on 127.0.0.1 (a free port it picks), and what it saw, read from its log."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from gevent import subprocess

from tests.helpers import wait_gone, wait_until

HTTP_TOOLS = str(Path(__file__).resolve().parent / "mcp_servers" / "http_tools.py")


class HttpMcpServer:
    """The sdk_tools server over streamable HTTP, started for one test."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.log = tmp_path / "http-server.log"
        self.mark_dir = tmp_path / "marks"
        self.mark_dir.mkdir(exist_ok=True)
        env = {**os.environ, "MARK_DIR": str(self.mark_dir)}
        self.stderr = tmp_path / "http-server.stderr"
        with open(self.stderr, "wb") as stderr:
            self.proc = subprocess.Popen([sys.executable, HTTP_TOOLS, str(self.log), *args], env=env,
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
        wait_until(lambda: self.log.exists() and self.log.read_text().endswith("\n") or self.proc.poll() is not None,
                   60, "the HTTP MCP server to pick its port")
        assert self.proc.poll() is None, f"the HTTP MCP server did not start: {self.stderr.read_text()[-2000:]}"
        self.port = json.loads(self.log.read_text().splitlines()[0])["port"]
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def entry(self, name: str = "web", headers: dict[str, str] | None = None) -> dict[str, Any]:
        """The `type: "http"` McpServer entry for `session/new`."""
        return {"type": "http", "name": name, "url": self.url,
                "headers": [{"name": k, "value": v} for k, v in (headers or {}).items()]}

    def records(self) -> list[dict[str, Any]]:
        """Every exchange the server logged, in order (the first line, its port, left out)."""
        return [json.loads(line) for line in self.log.read_text().splitlines()[1:] if line.strip()]

    def marked(self, name: str) -> bool:
        return (self.mark_dir / name).exists()

    def kill(self) -> None:
        """SIGKILL: the server dies mid-whatever, as a crash would."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        assert wait_gone(self.proc.pid)


def established_to(port: int) -> int:
    """TCP connections in ESTABLISHED (or closing on our side) state whose remote end is `port` on this machine."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            state = fields[3]
            if remote_port == port and state in ("01", "08"):  # ESTABLISHED, CLOSE_WAIT
                count += 1
    return count
