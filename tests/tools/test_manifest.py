"""`acp-green manifest`: the registry entry written from a package's pyproject.toml (or its
installed metadata) and its agent's auth_methods passes its own `--check`; whatever is missing
is named with how to supply it and nothing is written; `--check` fails an agent that does not
start, does not answer initialize, or offers no login of a kind the registry accepts, and an
icon.svg that is missing or breaks the registry's icon rules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from importlib import metadata
from pathlib import Path

import pytest

from tests.helpers import REPO

ACP_GREEN = [sys.executable, "-m", "acp_green"]

PYPROJECT = """\
[project]
name = "hello-agent"
version = "1.2.3"
description = "A friendly agent"
license = "MIT"
authors = [{name = "Ada Lovelace", email = "ada@example.com"}]

[project.urls]
Repository = "https://example.com/ada/hello-agent"

[project.scripts]
hello-agent = "acp_green.__main__:main"
"""

AGENT = """\
from acp_green import Agent, AuthMethod


class Hello(Agent):
    auth_methods = (AuthMethod("login", "Log in", "Opens a browser"),)

    def authenticate(self, method_id, snapshot):
        pass

    def prompt(self, turn):
        turn.say("hello")


class NoLogin(Agent):
    def prompt(self, turn):
        turn.say("hello")
"""

ICON = """<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 16 16">
  <circle cx="8" cy="8" r="6" fill="currentColor"/>
</svg>
"""


def env(**extra: str) -> dict[str, str]:
    """This environment with the repository importable (agents named tests.agents:NAME) from any directory."""
    paths = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), **extra}


def run(cwd: Path, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([*ACP_GREEN, "manifest", *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env=env(**(extra_env or {})))
    assert "Traceback" not in done.stderr, done.stderr
    return done


def check(cwd: Path, *args: str, extra_env: dict[str, str] | None = None) -> tuple[int, dict[str, tuple[str, str]]]:
    """Exit code and {check: (result, reason)} of `manifest --check ... --json`."""
    done = run(cwd, "--check", *args, "--json", extra_env=extra_env)
    report = json.loads(done.stdout)
    assert report["ok"] is (done.returncode == 0)
    return done.returncode, {c["check"]: (c["result"], c["reason"]) for c in report["checks"]}


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A package directory: pyproject.toml, the agent module and its icon beside it."""
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (tmp_path / "hello_agent.py").write_text(AGENT, encoding="utf-8")
    (tmp_path / "icon.svg").write_text(ICON, encoding="utf-8")
    return tmp_path


def serve_command(package: Path, attr: str) -> str:
    return f"{sys.executable} -m acp_green serve --ephemeral --agent {package / 'hello_agent.py'}:{attr}"


def test_the_manifest_is_written_from_the_pyproject_and_passes_its_own_check(package: Path):
    done = run(package, "--agent", "hello_agent:Hello")
    assert done.returncode == 0, done.stderr
    written = json.loads((package / "agent.json").read_text())
    assert written == {
        "id": "hello-agent", "name": "hello-agent", "version": "1.2.3", "description": "A friendly agent",
        "repository": "https://example.com/ada/hello-agent", "authors": ["Ada Lovelace <ada@example.com>"],
        "license": "MIT",
        "distribution": {"uvx": {"package": "hello-agent==1.2.3", "args": ["serve", "--agent", "hello_agent:Hello"]}},
    }
    code, checks = check(package, "agent.json", "--command", serve_command(package, "Hello"))
    assert code == 0, checks
    assert [result for result, _ in checks.values()] == ["PASS"] * 5
    assert checks["authMethods"][1].endswith("login (agent)")


def test_without_command_the_console_script_named_after_the_package_stands_in_for_uvx(package: Path):
    """`uvx acp-green==V serve --ephemeral` runs this environment's console script acp-green (the
    installed package declares it) with those arguments; a package not installed here has none."""
    from acp_green.version import __version__

    (package / "agent.json").write_text(json.dumps({
        "id": "acp-green", "name": "acp-green", "version": __version__, "description": "d",
        "distribution": {"uvx": {"package": f"acp-green=={__version__}", "args": ["serve", "--ephemeral"]}}}))
    script = Path(sys.executable).parent / "acp-green"
    _code, checks = check(package, "agent.json")  # the demo offers no login: authMethods fails, not our concern here
    assert checks["initialize"][0] == "PASS", checks
    assert checks["start"] == ("PASS", f"`{script} serve --ephemeral` started (this environment's console script "
                                       f"acp-green in place of `uvx acp-green=={__version__}` (no network))")
    (package / "agent.json").write_text(json.dumps({
        "id": "hello", "name": "Hello", "version": "1.2.3", "description": "d",
        "distribution": {"uvx": {"package": "hello-agent==1.2.3", "args": ["serve"]}}}))
    code, checks = check(package, "agent.json")
    assert code == 1 and checks["start"][0] == "FAIL" and "no console script 'hello-agent'" in checks["start"][1]


def test_missing_metadata_names_each_field_and_how_to_supply_it_and_writes_nothing(package: Path):
    (package / "pyproject.toml").write_text(textwrap.dedent("""\
        [project]
        name = "hello-agent"
        dynamic = ["version"]
        [project.scripts]
        hello-agent = "acp_green.__main__:main"
        """), encoding="utf-8")
    done = run(package, "--agent", "hello_agent:Hello")
    assert done.returncode == 2
    assert not (package / "agent.json").exists()
    errors = {line.split(":", 2)[1].strip(): line for line in done.stderr.splitlines() if line.startswith("Error:")}
    assert sorted(errors) == ["authors", "description", "license", "repository", "version"]
    assert "dynamic" in errors["version"] and "--package" in errors["version"]
    assert "--license SPDX-ID" in errors["license"] and "--repository URL" in errors["repository"]
    assert "--author" in errors["authors"] and "--description" in errors["description"]
    given = run(package, "--agent", "hello_agent:Hello", "--version", "2.0.0", "--description", "Hi", "--license", "MIT",
                "--author", "Ada", "--repository", "https://example.com/ada")
    assert given.returncode == 0, given.stderr
    assert json.loads((package / "agent.json").read_text())["distribution"]["uvx"]["package"] == "hello-agent==2.0.0"


def test_what_is_there_but_breaks_the_format_is_refused_before_writing(package: Path):
    (package / "pyproject.toml").write_text(PYPROJECT.replace('version = "1.2.3"', 'version = "1.2"'), encoding="utf-8")
    done = run(package, "--agent", "hello_agent:Hello")
    assert done.returncode == 2 and not (package / "agent.json").exists()
    assert "Error: version: '1.2' is not a semantic version" in done.stderr
    done = run(package, "--agent", "hello_agent:Hello", "--id", "Hello_Agent")
    assert done.returncode == 2 and "Error: id: 'Hello_Agent': lowercase letters, digits and hyphens" in done.stderr


def test_without_a_pyproject_or_an_installed_package_the_error_says_what_to_give(tmp_path: Path):
    done = run(tmp_path, "--agent", "tests.agents:NeedsAuthAgent")
    assert done.returncode == 2 and "no pyproject.toml" in done.stderr and "--package" in done.stderr
    done = run(tmp_path, "--package", "no-such-distribution-here")
    assert done.returncode == 2 and "no installed distribution named 'no-such-distribution-here'" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_agent_without_a_login_of_an_accepted_kind_gets_no_manifest(package: Path):
    done = run(package, "--agent", "hello_agent:NoLogin")
    assert done.returncode == 2 and not (package / "agent.json").exists()
    assert "Error: authMethods: hello_agent:NoLogin: none advertised" in done.stderr
    done = run(package)
    assert done.returncode == 2 and "Error: authMethods: give --agent MODULE:ATTR" in done.stderr


def test_the_installed_metadata_is_read_with_package(tmp_path: Path):
    """acp-green's own distribution: its console script is acp-green's command line, so the args serve the agent."""
    (tmp_path / "icon.svg").write_text(ICON, encoding="utf-8")  # the registry's directory holds it: here, the current one
    done = run(tmp_path, "--package", "acp-green", "--agent", "tests.agents:NeedsAuthAgent", "--out", "-",
               "--author", "The authors", "--repository", "https://example.com/acp-green")
    assert done.returncode == 0, done.stderr
    written = json.loads(done.stdout)
    version = metadata.version("acp-green")
    assert (written["id"], written["version"], written["license"]) == ("acp-green", version, "MIT")
    assert written["distribution"] == {"uvx": {"package": f"acp-green=={version}",
                                               "args": ["serve", "--agent", "tests.agents:NeedsAuthAgent"]}}


def test_the_console_script_decides_the_uvx_arguments(package: Path):
    own = PYPROJECT.replace('hello-agent = "acp_green.__main__:main"', 'hello-agent = "hello_agent:main"')
    (package / "pyproject.toml").write_text(own, encoding="utf-8")
    done = run(package, "--agent", "hello_agent:Hello", "--out", "-")
    assert json.loads(done.stdout)["distribution"] == {"uvx": {"package": "hello-agent==1.2.3"}}
    done = run(package, "--agent", "hello_agent:Hello", "--out", "-", "--args", "--acp --quiet")
    assert json.loads(done.stdout)["distribution"]["uvx"]["args"] == ["--acp", "--quiet"]
    (package / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    done = run(package, "--agent", "hello_agent.py:Hello")
    assert done.returncode == 2 and "Error: distribution.uvx.args:" in done.stderr and "not the file" in done.stderr
    two = PYPROJECT.replace('hello-agent = "acp_green.__main__:main"', 'hello = "hello_agent:main"\nhi = "hello_agent:main"')
    (package / "pyproject.toml").write_text(two, encoding="utf-8")
    done = run(package, "--agent", "hello_agent:Hello")
    assert done.returncode == 2 and "Error: distribution.uvx: uvx runs the command named after the package" in done.stderr
    assert "(it has hello, hi: which one would be the agent?)" in done.stderr


def test_a_malformed_manifest_is_refused_naming_the_field(tmp_path: Path):
    (tmp_path / "agent.json").write_text(json.dumps({"id": "x", "name": "X", "version": "1.0.0", "description": "d",
                                                     "distribution": {"uvx": {"args": []}}}))
    done = run(tmp_path, "--check", "agent.json", "--command", "true")
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "FAIL format: distribution.uvx.package: required",
        "SKIP icon: the manifest does not follow the format",
        "SKIP start: the manifest does not follow the format",
        "SKIP initialize: the manifest does not follow the format",
        "SKIP authMethods: the manifest does not follow the format",
    ]
    (tmp_path / "agent.json").write_text("{not json")
    code, checks = check(tmp_path, "agent.json")
    assert code == 1 and checks["format"][0] == "FAIL" and checks["format"][1].startswith("not JSON")


def test_an_agent_that_does_not_answer_initialize_fails_the_check(package: Path):
    assert run(package, "--agent", "hello_agent:Hello").returncode == 0
    started = time.monotonic()
    code, checks = check(package, "agent.json", "--timeout", "1", "--command", f"{sys.executable} -c 'import time; time.sleep(60)'")
    assert code == 1
    assert checks["start"][0] == "PASS"
    assert checks["initialize"] == ("FAIL", "no answer within 1s")
    assert checks["authMethods"][0] == "SKIP"
    assert time.monotonic() - started < 9, "a silent agent is killed, not given the 10 s an agent gets to exit after EOF"


def test_an_agent_that_exits_at_once_fails_to_start(package: Path):
    assert run(package, "--agent", "hello_agent:Hello").returncode == 0
    code, checks = check(package, "agent.json", "--command", f"{sys.executable} -c 'import sys; sys.exit(\"no config\")'")
    assert code == 1
    assert checks["start"][0] == "FAIL" and "exited (code 1)" in checks["start"][1] and "no config" in checks["start"][1]


RAW_AGENT = """\
import json, os, sys
request = json.loads(sys.stdin.readline())
result = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": %s}
sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}) + "\\n")
sys.stdout.flush()
sys.stdin.read()
"""


@pytest.mark.parametrize(("methods", "ok"), [
    ([{"id": "key", "name": "API key", "type": "env_var", "vars": [{"name": "KEY"}]}], False),
    ([], False),
    ([{"id": "setup", "name": "Set up", "type": "terminal", "args": ["--login"]}], True),
    ([{"id": "key", "name": "API key", "type": "env_var"}, {"id": "setup", "name": "Set up", "_meta": {"terminal-auth": {}}}], True),
], ids=["env-var-only", "none", "terminal", "env-var-and-terminal-meta"])
def test_the_kind_of_each_auth_method_decides_the_auth_check(package: Path, methods: list, ok: bool):
    assert run(package, "--agent", "hello_agent:Hello").returncode == 0
    (package / "raw_agent.py").write_text(RAW_AGENT % json.dumps(methods).replace("true", "True"), encoding="utf-8")
    code, checks = check(package, "agent.json", "--command", f"{sys.executable} {package / 'raw_agent.py'}")
    assert checks["initialize"][0] == "PASS"
    assert (code == 0, checks["authMethods"][0]) == (ok, "PASS" if ok else "FAIL"), checks["authMethods"]
    if not ok and methods:
        assert checks["authMethods"][1] == "no method of type agent or terminal: found key (env_var)"


def test_the_agent_runs_with_a_fresh_home_unless_kept(package: Path):
    """As in the registry's check, an agent cannot lean on the author's own login or settings."""
    assert run(package, "--agent", "hello_agent:Hello").returncode == 0
    (package / "home_agent.py").write_text(RAW_AGENT % '[{"id": os.environ["HOME"], "name": "Home"}]', encoding="utf-8")
    command = f"{sys.executable} {package / 'home_agent.py'}"
    home = os.path.expanduser("~")
    _, checks = check(package, "agent.json", "--command", command)
    assert checks["authMethods"][0] == "PASS" and home not in checks["authMethods"][1] and "acp-green-manifest-" in checks["authMethods"][1]
    _, checks = check(package, "agent.json", "--command", command, "--keep-home")
    assert checks["authMethods"][1] == f"of a kind the registry accepts: {home} (agent)"


def test_the_agent_gets_the_environment_its_distribution_names(package: Path):
    assert run(package, "--agent", "hello_agent:Hello").returncode == 0
    written = json.loads((package / "agent.json").read_text())
    written["distribution"]["uvx"]["env"] = {"GREETING": "hello from the manifest"}
    (package / "agent.json").write_text(json.dumps(written))
    (package / "env_agent.py").write_text(RAW_AGENT % '[{"id": os.environ.get("GREETING", "unset"), "name": "Env"}]',
                                          encoding="utf-8")
    code, checks = check(package, "agent.json", "--command", f"{sys.executable} {package / 'env_agent.py'}")
    assert code == 0 and checks["authMethods"][1] == "of a kind the registry accepts: hello from the manifest (agent)"


def test_the_options_of_the_other_job_are_refused(package: Path):
    done = run(package, "--check", "agent.json", "--agent", "hello_agent:Hello")
    assert done.returncode == 2 and "--check takes only --command, --timeout, --keep-home and --json" in done.stderr
    done = run(package, "--agent", "hello_agent:Hello", "--command", "true")
    assert done.returncode == 2 and "go with --check FILE" in done.stderr
    assert not (package / "agent.json").exists()


def test_an_agent_gone_before_initialize_is_written_fails_to_start_instead_of_raising():
    """Writing to an agent that has exited is a closed pipe: a failed start, not a traceback (or click's silent EPIPE exit)."""
    from acp_green.tools.publish.check import CheckReport, _Agent, _initialize

    agent = _Agent(["sh", "-c", "echo bad config >&2"], dict(os.environ))
    try:
        agent.proc.wait(timeout=30)
        report = CheckReport("agent.json")
        report.add("format", "PASS", "")
        assert _initialize(report, agent, "given by --command", 5.0) is False
    finally:
        agent.close(answered=False)
    assert [(line.check, line.result) for line in report.lines][1:] == [
        ("start", "FAIL"), ("icon", "SKIP"), ("initialize", "SKIP"), ("authMethods", "SKIP")]
    assert report.lines[1].reason == "exited (code 0) before reading initialize; its stderr ends: bad config"


def test_an_npx_distribution_is_started_only_by_command(package: Path):
    (package / "agent.json").write_text(json.dumps({
        "id": "hello", "name": "Hello", "version": "1.2.3", "description": "d",
        "distribution": {"npx": {"package": "@ada/hello@1.2.3", "args": ["--acp"]}}}))
    code, checks = check(package, "agent.json")
    assert code == 1
    assert checks["start"] == ("FAIL", "the npx distribution needs the network to start; give --command with what it would run")
    code, checks = check(package, "agent.json", "--command", serve_command(package, "Hello"))
    assert code == 0 and checks["start"][1].endswith("(given by --command, in place of the npx distribution)")


@pytest.mark.parametrize(("line", "field", "said"), [
    ("name = 5", "name", "is an integer, not a string"),
    ("version = 1.5", "version", "is a number, not a string"),
    ('description = "Line one\\nline two"', "description", "holds more than one line"),
    ('license = {file = "LICENSE"}', "license", "is a license file or text, not an SPDX identifier"),
    ("license = 3", "license", "is an integer, not a string"),
    ('authors = "Ada"', "authors", "is a string, not a list of tables"),
    ('urls = "https://example.com"', "repository", "urls is a string, not a table"),
    ('scripts = "acp_green.__main__:main"', "distribution.uvx", "scripts is a string, not a table"),
    ("dynamic = 5", "version", "dynamic is an integer, not a list of field names"),
])
def test_an_ill_typed_pyproject_field_is_named_with_what_it_is(tmp_path: Path, line: str, field: str, said: str):
    from acp_green.tools.publish.manifest import ManifestError, ManifestRequest, build_manifest
    from acp_green.tools.publish.metadata import from_pyproject

    key = line.split(" =")[0]
    kept = [row for row in PYPROJECT.split("\n[project.urls]")[0].splitlines()[1:] if not row.startswith(key + " ")]
    if key == "dynamic":
        kept = [row for row in kept if not row.startswith("version ")]
    (tmp_path / "pyproject.toml").write_text("\n".join(["[project]", *kept, line]) + "\n", encoding="utf-8")
    info = from_pyproject(tmp_path / "pyproject.toml")
    with pytest.raises(ManifestError) as refused:
        build_manifest(ManifestRequest(info, "hello_agent:Hello", [{"id": "login", "name": "Log in"}]))
    named = {problem.field: str(problem) for problem in refused.value.problems}
    assert said in named[field], named


def test_a_pyproject_of_ill_typed_tables_is_refused_in_lines_not_a_traceback(package: Path):
    (package / "pyproject.toml").write_text('[project]\nname = "hello-agent"\nversion = "1.2.3"\nauthors = 5\n'
                                            'urls = "x"\nscripts = "x"\ndynamic = 5\n', encoding="utf-8")
    done = run(package, "--agent", "hello_agent:Hello")
    assert done.returncode == 2 and not (package / "agent.json").exists()
    assert "Error: authors: is an integer, not a list of tables" in done.stderr
    assert "Error: distribution.uvx: scripts is a string, not a table" in done.stderr


@pytest.mark.parametrize(("content", "said"), [
    (b"[" * 20_000, "not JSON a registry entry could be: nested too deep to read"),
    (b'{"id": ' + b"1" * 5000 + b"}", "not JSON a registry entry could be: a number too long to read"),
    (b"\xff\xfe{}", "cannot read agent.json: 'utf-8' codec can't decode"),
    (b"{not json", "not JSON: Expecting property name"),
    (b'{"id": "' + b"x" * 70_000 + b'"}', "is larger than 65,536 bytes: not a registry entry"),
])
def test_a_manifest_that_cannot_be_read_is_one_format_line(tmp_path: Path, monkeypatch, content: bytes, said: str):
    from acp_green.tools.publish import check as check_module

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(check_module, "MAX_MANIFEST_BYTES", 65_536)  # the bound, made small enough to cross here
    (tmp_path / "agent.json").write_bytes(content)
    report = check_module.check_manifest("agent.json", check_module.CheckOptions())
    assert [(line.check, line.result) for line in report.lines] == [
        ("format", "FAIL"), ("icon", "SKIP"), ("start", "SKIP"), ("initialize", "SKIP"), ("authMethods", "SKIP")]
    assert said in report.lines[0].reason


FLOODS = {
    "an endless line": "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",
    "endless notifications": "import sys\nwhile True:\n    sys.stdout.write('{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\\n' * 1000)\n",
}


@pytest.mark.parametrize("flood", sorted(FLOODS))
def test_an_agent_flooding_stdout_fails_initialize_at_once_in_bounded_memory(package: Path, flood: str):
    (package / "flood.py").write_text(FLOODS[flood], encoding="utf-8")
    assert run(package, "--agent", "hello_agent:Hello").returncode == 0
    started = time.monotonic()
    code, checks = check(package, "agent.json", "--timeout", "30", "--command", f"{sys.executable} flood.py")
    assert code == 1 and time.monotonic() - started < 20, "stopped at the byte bound, long before the 30 s timeout"
    assert checks["initialize"][0] == "FAIL" and checks["initialize"][1].startswith("no answer in the first 1,048,576 bytes")
    assert len(checks["initialize"][1]) < 600


def test_an_agent_that_prints_before_answering_fails_initialize_naming_the_line(package: Path):
    (package / "chatty.py").write_text(
        "import json, sys\nprint('Welcome to my agent!')\nrequest = json.loads(sys.stdin.readline())\n"
        "print(json.dumps({'jsonrpc': '2.0', 'id': request['id'], 'result': {'protocolVersion': 1, "
        "'authMethods': [{'id': 'login', 'name': 'Log in'}]}}), flush=True)\nsys.stdin.read()\n", encoding="utf-8")
    assert run(package, "--agent", "hello_agent:Hello").returncode == 0
    code, checks = check(package, "agent.json", "--command", f"{sys.executable} chatty.py")
    assert code == 1
    assert checks["initialize"][0] == "FAIL"
    assert "1 line(s) on stdout that are not JSON-RPC" in checks["initialize"][1] and "Welcome to my agent!" in checks["initialize"][1]


def test_a_long_error_answer_is_one_bounded_line(package: Path):
    (package / "refuses.py").write_text(
        "import json, sys\nrequest = json.loads(sys.stdin.readline())\n"
        "print(json.dumps({'jsonrpc': '2.0', 'id': request['id'], 'error': {'code': -32603, 'message': 'x' * 100000 + '\\nmore'}}), "
        "flush=True)\nsys.stdin.read()\n", encoding="utf-8")
    assert run(package, "--agent", "hello_agent:Hello").returncode == 0
    done = run(package, "--check", "agent.json", "--command", f"{sys.executable} refuses.py")
    assert done.returncode == 1
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAIL initialize: answered an error -32603: xxx")]
    assert len(failed) == 1 and len(failed[0]) < 400 and "(100,005 characters)" in failed[0]


@pytest.mark.parametrize(("name", "entry_id"), [("Hello_Agent", "hello-agent"), ("My.Cool__Agent", "my-cool-agent"),
                                                ("hello-agent", "hello-agent"), ("_Agent_", "agent"), ("9lives", None)])
def test_the_id_is_the_package_name_lowercased_with_hyphens(name: str, entry_id: str | None):
    from acp_green.tools.publish.manifest import _id_of

    assert _id_of(name) == entry_id


def test_an_out_file_that_cannot_be_written_is_one_line(package: Path):
    done = run(package, "--agent", "hello_agent:Hello", "--out", str(package / "no-such-dir" / "agent.json"))
    assert done.returncode == 2
    assert done.stderr.strip() == f"Error: --out: cannot write {package / 'no-such-dir' / 'agent.json'}: No such file or directory"


@pytest.mark.parametrize("package_spec", ["acp-green==1.2.3", "no-such-package-here==1.2.3"])
def test_an_untrusted_manifest_cannot_make_the_check_run_a_program_from_path(package: Path, package_spec: str):
    """A manifest is untrusted input: its uvx `cmd` names the console script of its own package,
    never whatever program of that name is on PATH. `cmd: touch` with a path in `args` (a package
    that declares no `touch`, or one not installed) is refused unrun, and nothing is touched."""
    marker = package / "touched-by-the-check"
    (package / "agent.json").write_text(json.dumps({
        "id": "hello", "name": "Hello", "version": "1.2.3", "description": "d",
        "distribution": {"uvx": {"package": package_spec, "cmd": "touch", "args": [str(marker)]}}}))
    code, checks = check(package, "agent.json")
    assert code == 1
    result, reason = checks["start"]
    assert result == "FAIL" and "no console script 'touch' of the installed package" in reason, reason
    assert not marker.exists()
