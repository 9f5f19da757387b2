"""The README's two commands do everything themselves: scripts/test.sh installs the Node test peers
when node is present and otherwise the node tests skip with one reason; scripts/run.sh (slow tier)
installs from nothing into a fresh virtual environment and serves.

The script tests run copies of the scripts in a scratch tree whose `.venv` reaches this
environment's packages, with stand-ins for node and npm on PATH: no network, nothing installed.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata
import io
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.helpers import REPO
from tests.node_peers import NO_NODE_REASON

ROOT = REPO
TOOLS = ("bash", "env", "dirname", "touch", "rm", "mkdir", "cat", "chmod", "sh")
NODE_TESTS = ["tests/e2e/test_interop_conductor.py", "tests/e2e/test_interop_acpx.py", "tests/e2e/test_interop_typescript_sdk.py",
              "tests/tools/test_probe.py::test_what_the_probe_finds_in_an_agent_on_the_typescript_sdk"]


def tool_dir(path: Path, *extra: tuple[str, str]) -> Path:
    """A PATH directory holding only the basic tools the scripts use (so no node), plus `extra`
    scripts given as (name, body)."""
    path.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (path / tool).symlink_to(found)
    (path / "python3").symlink_to(sys.executable)
    for name, body in extra:
        (path / name).write_text(body)
        (path / name).chmod(0o755)
    return path


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """The scripts, the project files and one test file in a scratch tree, with a `.venv` that is
    this environment (its python, and its packages through a site directory) marked installed."""
    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    for name in ("test.sh", "venv.sh", "setup-node.sh"):
        shutil.copy2(ROOT / "scripts" / name, tree / "scripts" / name)
    for name in ("setup.py", "pyproject.toml", "tox.ini"):
        shutil.copy2(ROOT / name, tree / name)
    (tree / "tests" / "node").mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy2(ROOT / "tests" / "node" / name, tree / "tests" / "node" / name)
    shutil.copy2(ROOT / "tests" / "node_peers.py", tree / "tests" / "node_peers.py")
    (tree / "tests" / "__init__.py").write_text("")
    (tree / "tests" / "test_needs_node.py").write_text(
        "from tests.node_peers import needs_node, require_node_package\n\n\n"
        "@needs_node\ndef test_a_node_peer_is_installed():\n    require_node_package('@agentclientprotocol', 'sdk')\n")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tree / ".venv")], check=True, timeout=120)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(tree / ".venv"), "platbase": str(tree / ".venv")}))
    (site / "this_env.pth").write_text(f"import site; site.addsitedir({sysconfig.get_path('purelib')!r})\n")
    (tree / ".venv" / ".installed-test,rig").touch()  # newer than the copied setup.py: no pip run
    return tree


def run_test_sh(tree: Path, path_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": str(path_dir), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([str(tree / "scripts" / "test.sh"), "-n", "0", "-rs", "-p", "no:cacheprovider", "tests/test_needs_node.py"],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=300)


FAKE_NPM = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/npm-calls"
mkdir -p node_modules/@agentclientprotocol/sdk node_modules/@thinkwell/conductor node_modules/.bin
touch node_modules/.bin/acpx node_modules/.package-lock.json && chmod +x node_modules/.bin/acpx
"""


def test_test_sh_installs_the_node_peers_itself_when_node_is_present(scratch, tmp_path):
    bin_dir = tool_dir(tmp_path / "bin", ("node", "#!/bin/sh\nexit 0\n"), ("npm", FAKE_NPM))
    done = run_test_sh(scratch, bin_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (bin_dir / "npm-calls").read_text().split()[0] == "ci"  # the pinned lock, as written
    assert "1 passed" in done.stdout


def test_without_node_test_sh_says_so_once_and_the_node_tests_skip_with_one_reason(scratch, tmp_path):
    done = run_test_sh(scratch, tool_dir(tmp_path / "bin"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr.count("setup-node: node is not installed") == 1
    assert "1 skipped" in done.stdout and NO_NODE_REASON in done.stdout


def test_every_node_test_skips_with_the_same_reason_without_node(tmp_path):
    """The suite's own node tests, run where node cannot be found: each skips, all for one reason."""
    env = {**os.environ, "PATH": str(tool_dir(tmp_path / "bin"))}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-rs", "-q", *NODE_TESTS],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    reasons = set(re.findall(r"^SKIPPED \[\d+\] [^:]+:\d+: (.*)$", done.stdout, re.M))
    assert reasons == {NO_NODE_REASON}, done.stdout
    assert "passed" not in done.stdout and "failed" not in done.stdout


def test_setup_node_without_npm_is_an_error_naming_npm(tmp_path):
    bin_dir = tool_dir(tmp_path / "bin", ("node", "#!/bin/sh\nexit 0\n"))
    done = subprocess.run([str(ROOT / "scripts" / "setup-node.sh")], env={**os.environ, "PATH": str(bin_dir)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "npm is not" in done.stderr



# -- the browser the trace html tests need (CI runs scripts/setup-browser.sh first) ------------------
def run_setup_browser(bin_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ROOT / "scripts" / "setup-browser.sh")], env={**os.environ, "PATH": str(bin_dir)},
                          capture_output=True, text=True, timeout=60)


def test_setup_browser_does_nothing_when_chromium_is_there(tmp_path):
    log = tmp_path / "apt.log"
    bin_dir = tool_dir(tmp_path / "bin", ("chromium", "#!/bin/sh\nexit 0\n"), ("apt-get", f"#!/bin/sh\necho \"$*\" >> {log}\n"))
    done = run_setup_browser(bin_dir)
    assert (done.returncode, done.stderr, log.exists()) == (0, "", False)


def test_setup_browser_installs_chromium_with_apt_get(tmp_path):
    log = tmp_path / "apt.log"
    bin_dir = tmp_path / "bin"
    apt = f"#!/bin/sh\necho \"$*\" >> {log}\ncase \"$*\" in *install*) printf '#!/bin/sh\\n' > {bin_dir}/chromium; chmod +x {bin_dir}/chromium;; esac\n"
    tool_dir(bin_dir, ("apt-get", apt), ("id", "#!/bin/sh\necho 0\n"))
    done = run_setup_browser(bin_dir)
    assert done.returncode == 0, done.stderr
    assert log.read_text().splitlines() == ["update -qq", "install -y -qq chromium"]
    assert run_setup_browser(bin_dir).returncode == 0 and len(log.read_text().splitlines()) == 2


def test_setup_browser_without_apt_get_fails_saying_so(tmp_path):
    done = run_setup_browser(tool_dir(tmp_path / "bin"))
    assert done.returncode == 1 and "apt-get is not available" in done.stderr

# -- the run command, from nothing (slow tier) ------------------------------------------------------
def _wheel_of_installed(dist: importlib.metadata.Distribution, into: Path) -> None:
    """Pack an installed distribution back into a wheel, from the files its RECORD lists, so pip can
    install it with --no-index; files outside site-packages (scripts) are left to pip to remake."""
    base = Path(dist.locate_file(""))
    wheel_meta = dist.read_text("WHEEL") or ""
    tag = re.search(r"^Tag: (.+)$", wheel_meta, re.M).group(1)
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    target = into / f"{name}-{dist.version}-{tag}.whl"
    [dist_info] = {f.parts[0] for f in dist.files or [] if len(f.parts) == 2 and f.parts[0].endswith(".dist-info")}
    record_name = f"{dist_info}/RECORD"
    records = []
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as wheel:
        for file in dist.files or []:
            relative = file.as_posix()
            if relative.startswith("..") or relative == record_name or relative.endswith(".pyc") or "__editable__" in relative:
                continue
            data = (base / relative).read_bytes()
            wheel.writestr(relative, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append((relative, f"sha256={digest}", str(len(data))))
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows([*records, (record_name, "", "")])
        wheel.writestr(record_name, out.getvalue())


def _needed(requirements: list[str] | None) -> list[str]:
    """The names of the requirements that apply here, without extras."""
    needed = []
    for text in requirements or []:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            needed.append(requirement.name)
    return needed


def _wheelhouse(into: Path) -> Path:
    """Wheels of what `pip install -e .` needs (the runtime's dependencies and the build backend),
    packed from this environment."""
    into.mkdir()
    return _pack_with_dependencies(["setuptools", *_needed(importlib.metadata.requires("acp-green"))], into)


def _pack_with_dependencies(wanted: list[str], into: Path) -> Path:
    """A wheel in `into` of each installed distribution named, and of everything it requires."""
    seen: set[str] = set()
    while wanted:
        name = wanted.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        seen.add(key)
        dist = importlib.metadata.distribution(name)
        _wheel_of_installed(dist, into)
        wanted += _needed(dist.requires)
    return into


def _distribution_python() -> list:
    """A distribution's own Python that refuses `pip install` outside a virtual environment (PEP
    668), when this machine has one of this Python's version (the wheels are built for it)."""
    python = Path("/usr/bin/python3")
    if not python.exists():
        return []
    probe = subprocess.run([str(python), "-c", "import sys, sysconfig; print('%d.%d' % sys.version_info[:2], sysconfig.get_path('stdlib'))"],
                           capture_output=True, text=True, timeout=60)
    version, _, stdlib = probe.stdout.strip().partition(" ")
    if version != "%d.%d" % sys.version_info[:2] or not (Path(stdlib) / "EXTERNALLY-MANAGED").exists():
        return []
    return [pytest.param(str(python), id="externally-managed-system-python")]


@pytest.mark.slow  # a fresh virtual environment and an install into it: half a minute or more
@pytest.mark.parametrize("python", [pytest.param(None, id="python3-on-PATH"), *_distribution_python()])
def test_the_readme_run_command_installs_from_nothing_and_serves(tmp_path, python):
    """scripts/run.sh in a fresh copy of the checkout (no .venv): it makes the virtual environment,
    installs (offline, from wheels of this environment's packages), says where `acp-green` is, and
    serves: `initialize` is answered and EOF ends it with exit 0. Run again, it installs nothing.
    With a distribution's PEP 668 Python (PYTHON=/usr/bin/python3) it works the same."""
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT, checkout, ignore=shutil.ignore_patterns(
        ".venv", ".git", "node_modules", "__pycache__", "*.egg-info", "build", ".pytest_cache",
        "bench-results", "soak-results", ".bench-cache", ".mutation", ".hypothesis"))
    wheels = _wheelhouse(tmp_path / "wheels")
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels), "PIP_CONFIG_FILE": os.devnull,
           "PIP_NO_CACHE_DIR": "1", "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    env.pop("VIRTUAL_ENV", None)
    if python:
        env["PYTHON"] = python
    done = subprocess.run([str(checkout / "scripts" / "run.sh")], cwd=tmp_path,
                          input=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}) + "\n",
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    [answer] = [json.loads(line) for line in done.stdout.splitlines()]
    assert answer["id"] == 1 and answer["result"]["protocolVersion"] == 1
    installed = checkout / ".venv" / "bin" / "acp-green"
    assert f"acp-green is installed at {installed};" in done.stderr
    assert os.access(installed, os.X_OK)
    again = subprocess.run([str(checkout / "scripts" / "run.sh"), "--ephemeral"], input="", env={**env, "PIP_FIND_LINKS": "/nonexistent"},
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and again.stdout == "", again.stderr


OLD_PYTHON = """#!/bin/sh
case "$2" in *version_info*) exit 1;; *python_version*) echo 3.9.2;; esac
"""
PYTHON_WITHOUT_VENV = """#!/bin/sh
if [ "$1" = "-m" ]; then mkdir -p .venv/bin; echo "ensurepip is not available" >&2; exit 1; fi
exit 0
"""


@pytest.mark.parametrize(("python", "said"), [
    (OLD_PYTHON, "acp-green needs Python 3.11 or newer; "),
    (PYTHON_WITHOUT_VENV, "cannot create a virtual environment (on Debian/Ubuntu: sudo apt install python3-venv)"),
])
def test_without_a_usable_python_the_install_says_what_to_do(scratch, tmp_path, python, said):
    """A Python older than 3.11, or a Debian one without python3-venv: one line naming the fix, exit 1,
    and no half-made .venv left behind to fail the next run."""
    shutil.rmtree(scratch / ".venv")
    bin_dir = tool_dir(tmp_path / "bin", ("old-or-bare-python", python))
    done = subprocess.run([str(scratch / "scripts" / "venv.sh")], cwd=scratch,
                          env={**os.environ, "PATH": str(bin_dir), "PYTHON": "old-or-bare-python"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and said in done.stderr, done.stderr
    assert not (scratch / ".venv").exists()


CHATTY_PYTHON = """#!/bin/sh
# A Python whose venv and pip talk on stdout (a verbose pip.conf, PIP_VERBOSE, a chatty wrapper).
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  echo "creating $3"
  mkdir -p "$3/bin"
  cat "$0" > "$3/bin/python"; chmod +x "$3/bin/python"
  echo '#!/bin/sh' > "$3/bin/acp-green"
  echo "echo '{\\"jsonrpc\\":\\"2.0\\",\\"id\\":1,\\"result\\":{}}'" >> "$3/bin/acp-green"
  chmod +x "$3/bin/acp-green"
  exit 0
fi
case "$*" in *"pip install"*) echo "Collecting acp-green"; echo "Successfully installed acp-green";; esac
case "$2" in *version_info*) exit 0;; esac
echo "pip 99 from nowhere"
"""


def test_run_sh_keeps_stdout_for_the_wire_whatever_the_install_prints(scratch, tmp_path):
    """Stdout is the wire: an editor launching scripts/run.sh reads JSON-RPC from its first byte,
    so whatever creating the venv and installing print goes to stderr."""
    shutil.copy2(ROOT / "scripts" / "run.sh", scratch / "scripts" / "run.sh")
    shutil.rmtree(scratch / ".venv")
    bin_dir = tool_dir(tmp_path / "bin", ("chatty-python", CHATTY_PYTHON))
    done = subprocess.run([str(scratch / "scripts" / "run.sh")], cwd=scratch, input="",
                          env={**os.environ, "PATH": str(bin_dir), "PYTHON": "chatty-python"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{"jsonrpc":"2.0","id":1,"result":{}}\n'
    assert "Successfully installed acp-green" in done.stderr and "creating .venv" in done.stderr
