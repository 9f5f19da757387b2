"""`acp-green new`: which names it takes (a distribution name that is also a module name shadowing
nothing the project needs), what it renders, where it refuses to write, and what it says.
The install from nothing is in test_newproject_install.py (slow tier)."""

from __future__ import annotations

import ast
import json
import keyword
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.cli import cli
from acp_green.editorconfig import EDITORS, WHERE, command_settings
from acp_green.tools.newproject.project import (
    NAME_LIMIT, TAKEN, ProjectRefused, check_name, installed_module_of, make_project, render, render_project, write_project,
)
from acp_green.version import __version__
from tests.helpers import REPO

GRAMMAR = re.compile(r"[A-Za-z]([A-Za-z0-9_-]*[A-Za-z0-9])?")


def settings_for(name: str):
    def made(command: str, env: dict[str, str]):
        return [(WHERE[editor], command_settings(editor, name, command, [], env)) for editor in EDITORS]
    return made


def files_of(name: str, llm: bool, target: Path = Path("/projects/x")) -> dict[str, str]:
    return render_project(check_name(name), target, llm=llm, editor_settings=settings_for(name))


# -- the name ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "why"), [
    ("my agent", "it contains a space"),
    ("1abc", "it starts with '1'"),
    ("-abc", "it starts with '-'"),
    ("_abc", "it starts with '_'"),
    ("abc-", "it ends with '-'"),
    ("my.agent", "it contains '.'"),
    ("agént", "it contains 'é'"),
    ("", "it is empty"),
    ("a" * (NAME_LIMIT + 1), f"it is {NAME_LIMIT + 1} characters long (at most {NAME_LIMIT})"),
    ("class", "its module name 'class' is a Python keyword"),
    ("json", "would shadow the standard library's 'json'"),
    ("Email", "would shadow the standard library's 'email'"),
    ("acp-green", "its module name 'acp_green' is taken"),
    ("tests", "its module name 'tests' is taken"),
    ("build", "its package directory 'build' is where the build writes its output"),
    ("Dist", "its package directory 'dist' is where the build writes its output"),
])
def test_a_name_that_cannot_be_a_project_is_refused_naming_the_problem(name, why):
    with pytest.raises(ProjectRefused) as refused:
        check_name(name)
    assert str(refused.value).startswith(f"{name!r} is not a usable project name: ")
    assert why in str(refused.value)


@pytest.mark.parametrize(("name", "module", "class_name"), [
    ("hello", "hello", "HelloAgent"),
    ("my-agent", "my_agent", "MyAgent"),
    ("Weather_Bot2", "weather_bot2", "WeatherBot2Agent"),
    ("agent", "agent", "AgentAgent"),  # never plain `Agent`, which the agent module imports
    ("x", "x", "XAgent"),
])
def test_a_good_name_gives_the_module_and_the_agent_class(name, module, class_name):
    project = check_name(name)
    assert (project.name, project.module, project.class_name) == (name, module, class_name)


@settings(deadline=None, max_examples=400)
@given(st.one_of(st.text(max_size=NAME_LIMIT + 3),
                 st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,70}", fullmatch=True),
                 st.text(alphabet="aZ09-_. é\t/", max_size=12)))
def test_a_name_is_taken_exactly_when_it_fits_the_grammar_and_shadows_nothing(name):
    """The boundary: accepted iff it fits `[A-Za-z]([A-Za-z0-9_-]*[A-Za-z0-9])?`, is at most
    NAME_LIMIT long, and its module (lower-case, - as _) is no keyword, stdlib or taken module."""
    module = name.replace("-", "_").lower()
    expected = (GRAMMAR.fullmatch(name) is not None and len(name) <= NAME_LIMIT and not keyword.iskeyword(module)
                and module not in sys.stdlib_module_names and module not in TAKEN and installed_module_of(module) is None)
    try:
        project = check_name(name)
    except ProjectRefused as exc:
        assert not expected, f"{name!r} refused: {exc}"
        assert str(exc).startswith(f"{name!r} is not a usable project name: ")
        return
    assert expected, f"{name!r} accepted"
    assert project.module == module and module.isidentifier()
    assert project.class_name.isidentifier() and project.class_name.endswith("Agent") and project.class_name != "Agent"


# -- rendering ----------------------------------------------------------------------------------
@settings(deadline=None, max_examples=40)
@given(st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,20}[A-Za-z0-9]", fullmatch=True).filter(
    lambda n: (m := n.replace("-", "_").lower()) not in TAKEN and m not in sys.stdlib_module_names and not keyword.iskeyword(m)
    and installed_module_of(m) is None),
    st.booleans())
def test_every_rendered_file_is_complete_and_every_python_file_parses(name, llm):
    files = files_of(name, llm)
    project = check_name(name)
    assert not [path for path, text in files.items() if "{{" in text]
    for path, text in files.items():
        if path.endswith(".py"):
            ast.parse(text, path)
    pyproject = tomllib.loads(files["pyproject.toml"])
    assert pyproject["project"]["name"] == name
    assert pyproject["project"]["scripts"] == {name: f"{project.module}.entry:main"}
    assert pyproject["project"]["entry-points"]["acp_green.agents"] == {name: f"{project.module}.agent:{project.class_name}"}
    assert f"acp-green>={__version__}" in pyproject["project"]["dependencies"]
    assert pyproject["tool"]["setuptools"]["packages"] == [project.module]
    agent = ast.parse(files[f"{project.module}/agent.py"])
    assert project.class_name in {node.name for node in agent.body if isinstance(node, ast.ClassDef)}
    entry = ast.parse(files[f"{project.module}/entry.py"])
    assert {node.name for node in entry.body if isinstance(node, ast.FunctionDef)} >= {"main"}


@pytest.mark.parametrize("llm", [False, True])
def test_the_project_holds_its_tests_ci_and_the_editor_settings(llm):
    files = files_of("my-agent", llm, Path("/projects/my-agent"))
    expected = {"pyproject.toml", "README.md", "ci.sh", ".github/workflows/ci.yml", ".gitignore", "icon.svg",
                "my_agent/__init__.py", "my_agent/__main__.py", "my_agent/agent.py", "my_agent/entry.py",
                "tests/conftest.py", "tests/test_agent.py"}
    assert set(files) == expected | ({"tests/fake_openai.py"} if llm else set())
    assert 'pytest_plugins = ["acp_green.testing"]' in files["tests/conftest.py"]
    tests = files["tests/test_agent.py"]
    assert "run_probe" in tests and "acp_connect(MyAgent" in tests and '"authenticate"' in tests
    assert "acp_connect([console_script" in tests and ".cancel()" in tests
    assert "./ci.sh" in files[".github/workflows/ci.yml"] and 'pip install' in files["ci.sh"]
    readme = files["README.md"]
    blocks = [json.loads(block) for block in re.findall(r"```json\n(.*?)\n```", readme, re.S)]
    script = "/projects/my-agent/.venv/bin/my-agent"
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1", "OPENAI_MODEL": "default"} if llm else {}
    assert blocks == [command_settings(editor, "my-agent", script, [], env) for editor in EDITORS]
    assert all(WHERE[editor] in readme for editor in EDITORS)


def test_the_llm_agent_reads_its_endpoint_from_the_environment_and_its_tests_serve_a_fake_one():
    files = files_of("chat", True)
    agent = files["chat/agent.py"]
    assert all(variable in agent for variable in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"))
    assert "turn.history(" in agent  # what the model is given of earlier turns: the stored conversation
    assert "FakeOpenAI" in files["tests/test_agent.py"] and "127.0.0.1" in files["tests/fake_openai.py"]
    assert "geventhttpclient" in files["pyproject.toml"] and "geventhttpclient" not in files_of("chat", False)["pyproject.toml"]


def test_a_placeholder_without_a_value_is_an_error_not_a_silent_hole():
    assert render("a {{x}} b {{ y }}", {"x": "1"}) == "a 1 b {{ y }}"
    with pytest.raises(ValueError, match="names {{z}}"):
        render("{{z}}", {})


# -- writing ------------------------------------------------------------------------------------
def test_a_new_or_empty_directory_is_written_and_ci_sh_is_executable(tmp_path):
    (tmp_path / "empty").mkdir()
    for target in (tmp_path / "new" / "deeper", tmp_path / "empty"):
        make_project("bot", target, llm=False, editor_settings=settings_for("bot"))
        assert (target / "bot" / "agent.py").is_file()
        assert os.access(target / "ci.sh", os.X_OK)


def test_an_existing_directory_with_anything_in_it_or_a_file_is_refused_and_left_alone(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / ".keep").write_text("")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ProjectRefused, match="exists and is not empty"):
        write_project(tmp_path / "full", {"a.txt": "a"})
    with pytest.raises(ProjectRefused, match="exists and is not a directory"):
        write_project(tmp_path / "afile", {"a.txt": "a"})
    assert os.listdir(tmp_path / "full") == [".keep"] and (tmp_path / "afile").read_text() == "x"


# -- the command --------------------------------------------------------------------------------
@pytest.mark.parametrize(("args", "said"), [
    (["my agent"], "Error: 'my agent' is not a usable project name: it contains a space"),
    (["1abc"], "Error: '1abc' is not a usable project name: it starts with '1'"),
    (["bot", "--dir", "full"], "exists and is not empty"),
])
def test_the_command_refuses_in_one_line_with_exit_2_and_writes_nothing(tmp_path, monkeypatch, args, said):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(cli, ["new", *args])
    assert done.exit_code == 2 and said in done.output, done.output
    assert len(done.output.strip().splitlines()) == 1
    assert sorted(os.listdir(tmp_path)) == ["full"] and os.listdir(tmp_path / "full") == ["x"]


@pytest.mark.parametrize("llm", [False, True])
def test_the_command_makes_the_project_and_says_what_next(tmp_path, monkeypatch, llm):
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(cli, ["new", "weather-bot", *(["--llm"] if llm else [])])
    assert done.exit_code == 0, done.output
    agent = tmp_path / "weather-bot" / "weather_bot" / "agent.py"
    assert "cd weather-bot" in done.output and "./ci.sh" in done.output and ".venv/bin/weather-bot" in done.output
    assert ("OPENAI_BASE_URL" in done.output) == llm
    assert ("OPENAI_BASE_URL" in agent.read_text()) == llm


# -- the generated tests, in this process's environment (needs acp_green.testing) ----------------
@pytest.mark.parametrize("llm", [False, True])
def test_the_generated_in_process_tests_pass_uninstalled(tmp_path, llm):
    """The project's in-process tests, run from its directory with this checkout and the project on
    PYTHONPATH (the console-script tests need the install: test_newproject_install.py)."""
    project = tmp_path / "demo-bot"
    make_project("demo-bot", project, llm=llm, editor_settings=settings_for("demo-bot"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(project)])}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "in_process"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(rf"\b{2 if llm else 3} passed", done.stdout), done.stdout


@pytest.mark.parametrize("name", ["attrs", "pluggy", "iniconfig", "Pluggy"])
def test_a_name_that_would_shadow_a_module_the_test_tools_import_is_refused(name):
    """`acp-green new attrs` made a project whose tests could not be collected (its package
    shadowed the attrs pytest imports): every module of the installed closure of acp-green,
    pytest and hypothesis is refused, naming the distribution."""
    with pytest.raises(ProjectRefused, match=f"would shadow the module of the same name of {name.lower()}"):
        check_name(name)
