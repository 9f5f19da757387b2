"""Which agents the bench runs: acp_green itself and the peers in acp_green/tools/bench/peer_agents/.

Peers' dependencies go into a scratch cache directory (a venv for the Python SDK, a
node_modules for the TypeScript SDK) only when asked; a peer whose runtime is missing is
skipped with a message saying what to do.
"""

from __future__ import annotations

import atexit
import importlib.metadata
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

PY_SDK = "agent-client-protocol==0.12.1"
MCP_SDK = "mcp==2.3.0"  # W8's MCP server and client, when the bench's own Python lacks it
TS_SDK_NAME = "@agentclientprotocol/sdk"
TS_SDK_VERSION = "2.4.0"
REPO_ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class AgentSpec:
    """An agent to measure: a short name and the command that starts it."""

    name: str
    command: tuple[str, ...]
    note: str = ""

    @property
    def is_acp_green(self) -> bool:
        """Named acp-green (or acp-green-...): the acp_green-only workloads run on it."""
        return self.name == "acp-green" or self.name.startswith("acp-green-")

    @classmethod
    def parse(cls, text: str) -> "AgentSpec":
        """NAME=COMMAND, COMMAND split like a shell would."""
        name, sep, command = text.partition("=")
        if not sep or not name.strip() or not command.strip():
            raise ValueError(f"expected NAME=COMMAND, got {text!r}")
        return cls(name.strip(), tuple(shlex.split(command)))


@dataclass
class Lineup:
    """The agents to run and why any default one was left out."""

    agents: list[AgentSpec] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def default_peers_dir() -> Path:
    """The peer agents' sources, installed with the package."""
    return Path(__file__).resolve().parent / "peer_agents"


def default_cache_dir() -> Path:
    """.bench-cache in a source checkout; else $XDG_CACHE_HOME/acp-green/bench (~/.cache/...)."""
    if (REPO_ROOT / ".git").exists():
        return REPO_ROOT / ".bench-cache"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "acp-green" / "bench"


def acp_green_agent() -> AgentSpec:
    # --ephemeral: the peers keep nothing on disk either, so SQLite stays out of the comparison.
    return AgentSpec("acp-green", (sys.executable, "-m", "acp_green", "serve", "--ephemeral"), "acp-green serve --ephemeral")


#: acp-green serve behind `acp-green record`: what recording costs, on the workloads in RECORDED_WORKLOADS.
RECORDED = "recorded"


def recorded_agent() -> AgentSpec:
    """`acp-green serve --ephemeral` behind the recorder, its traces in a scratch directory removed at exit."""
    traces = tempfile.mkdtemp(prefix="acp-green-bench-traces-")
    atexit.register(shutil.rmtree, traces, True)
    serve = acp_green_agent().command
    return AgentSpec(RECORDED, (sys.executable, "-m", "acp_green", "record", "--out-dir", traces, "--", *serve),
                     "acp-green serve --ephemeral behind acp-green record (a trace per launch)")


def python_sdk_agent(peers: Path, cache: Path) -> AgentSpec | str:
    """The Python SDK peer, or why it cannot run."""
    script = peers / "python_sdk_agent.py"
    if not script.is_file():
        return f"{script} not found"
    venv_python = cache / "python-sdk" / "bin" / "python"
    if venv_python.is_file():
        return AgentSpec("python-sdk", (str(venv_python), str(script)), f"{PY_SDK} in {venv_python.parent.parent}")
    try:
        if importlib.metadata.version("agent-client-protocol") == PY_SDK.split("==")[1]:
            return AgentSpec("python-sdk", (sys.executable, str(script)), f"{PY_SDK} from the current interpreter")
    except importlib.metadata.PackageNotFoundError:
        pass
    return f"{PY_SDK} is not installed; run with --install-peers (installs into {cache / 'python-sdk'})"


def ts_sdk_agent(peers: Path, cache: Path) -> AgentSpec | str:
    """The TypeScript SDK peer (copied next to its node_modules so ESM imports resolve), or why not."""
    source = peers / "ts_sdk_agent.mjs"
    node = shutil.which("node")
    if node is None:
        return "node is not on PATH (Node 20+ is needed)"
    manifest = cache / "node" / "node_modules" / TS_SDK_NAME / "package.json"
    try:
        version = json.loads(manifest.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return f"{TS_SDK_NAME}@{TS_SDK_VERSION} is not installed; run with --install-peers (installs into {cache / 'node'})"
    if version != TS_SDK_VERSION:
        return f"{TS_SDK_NAME} {version} found, {TS_SDK_VERSION} wanted; run with --install-peers"
    target = cache / "node" / source.name
    if not target.is_file() or target.read_bytes() != source.read_bytes():
        shutil.copyfile(source, target)
    return AgentSpec("ts-sdk", (node, str(target)), f"{TS_SDK_NAME}@{version} on node {_node_version(node)}")


def bare_loop_agent(peers: Path, cache: Path) -> AgentSpec | str:
    script = peers / "bare_loop.py"
    if not script.is_file():
        return f"{script} not found"
    return AgentSpec("bare-loop", (sys.executable, str(script)), "single-threaded stdlib loop")


PEERS: tuple[Callable[[Path, Path], AgentSpec | str], ...] = (python_sdk_agent, ts_sdk_agent, bare_loop_agent)
PEER_NAMES = ("python-sdk", "ts-sdk", "bare-loop")


def default_lineup(peers: Path, cache: Path) -> Lineup:
    """acp-green serve, the same behind the recorder, and every peer whose runtime is present."""
    lineup = Lineup([acp_green_agent(), recorded_agent()])
    for name, find in zip(PEER_NAMES, PEERS):
        found = find(peers, cache)
        if isinstance(found, AgentSpec):
            lineup.agents.append(found)
        else:
            lineup.skipped[name] = found
    return lineup


def install_peers(peers: Path, cache: Path, log: Callable[[str], None]) -> list[str]:
    """Install the peers' dependencies into `cache`; returns the problems (empty when all went well)."""
    problems: list[str] = []
    cache.mkdir(parents=True, exist_ok=True)
    venv = cache / "python-sdk"
    log(f"installing {PY_SDK} and {MCP_SDK} into {venv}")
    try:
        if not (venv / "bin" / "python").is_file():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, stdout=sys.stderr)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", PY_SDK, MCP_SDK], check=True, stdout=sys.stderr)
    except (OSError, subprocess.CalledProcessError) as exc:
        problems.append(f"python-sdk: {exc}")
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        problems.append("ts-sdk: node/npm not on PATH")
        return problems
    node_dir = cache / "node"
    node_dir.mkdir(exist_ok=True)
    shutil.copyfile(peers / "package.json", node_dir / "package.json")
    # The committed lock pins zod (the SDK's peer dependency) too; `npm ci` installs exactly it.
    locked = (peers / "package-lock.json").is_file()
    if locked:
        shutil.copyfile(peers / "package-lock.json", node_dir / "package-lock.json")
    log(f"installing {TS_SDK_NAME}@{TS_SDK_VERSION} into {node_dir}")
    try:
        verb = "ci" if locked else "install"
        subprocess.run([npm, verb, "--no-audit", "--no-fund", "--silent"], cwd=node_dir, check=True, stdout=sys.stderr)
    except (OSError, subprocess.CalledProcessError) as exc:
        problems.append(f"ts-sdk: {exc}")
    return problems


def _node_version(node: str) -> str:
    try:
        return subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10, env=os.environ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"
