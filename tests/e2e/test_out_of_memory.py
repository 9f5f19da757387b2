"""Under an address-space limit, a line too big for memory is answered and the agent reads on."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from typing import Any

import pytest


def _vm_size(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
def test_a_line_that_does_not_fit_in_memory_is_answered_out_of_memory_and_the_next_request_served() -> None:
    """Item 11: a 40 MB prompt (far below --max-line-bytes) to an agent whose address space
    leaves it 60 MB of room: the prompt is answered -32603 `out_of_memory` with its id (or its
    turn runs, should it fit after all), the session/list behind it is answered, and the agent
    exits 0 at EOF. The limit is set in the child (preexec) and tightened once it is up."""
    def limit_address_space() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    proc = subprocess.Popen([sys.executable, "-m", "acp_green", "serve", "--ephemeral"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limit_address_space)
    try:
        assert proc.stdin is not None and proc.stdout is not None

        def send(data: bytes) -> None:
            proc.stdin.write(data)
            proc.stdin.flush()

        send(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n')
        assert json.loads(proc.stdout.readline())["id"] == 1
        send(b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}\n')
        session_id = json.loads(proc.stdout.readline())["result"]["sessionId"]
        room = _vm_size(proc.pid) + (60 << 20)
        resource.prlimit(proc.pid, resource.RLIMIT_AS, (room, room))
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "x" * (40 << 20)}]}
        big = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt}).encode()
        send(big + b'\n{"jsonrpc":"2.0","id":4,"method":"session/list","params":{}}\n')
        del big, prompt
        proc.stdin.close()
        output = proc.stdout.read()
        errors = proc.stderr.read() if proc.stderr is not None else b""
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    answers: dict[Any, list[dict[str, Any]]] = {}
    for line in output.splitlines():
        message = json.loads(line)
        if "method" not in message:
            answers.setdefault(message.get("id"), []).append(message)
    assert proc.returncode == 0, errors[-2000:]
    assert set(answers) == {3, 4}, {k: [str(m)[:200] for m in v] for k, v in answers.items()}
    assert len(answers[3]) == 1 and len(answers[4]) == 1
    assert "result" in answers[4][0]
    assert answers[3][0].get("error", {}).get("data", {}).get("reason") == "out_of_memory", str(answers[3][0])[:300]
