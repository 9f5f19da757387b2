"""The registry's current rules (acp_green/tools/publish/: our schema, format.py, icon.py): the
icon.svg it requires beside agent.json (16×16, square, drawn in currentColor, no XML comments),
`cmd` in a uvx distribution (`uvx --from PACKAGE CMD`), the fields it added (website, license_url,
a binary's sha256, the preview channel) and the installers it refuses as a binary's archive;
`acp-green manifest` writes and `--check` checks by them."""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_green.tools.publish.format import PLATFORMS, Problem, validate
from acp_green.tools.publish.icon import icon_problems
from tests.tools.test_manifest import ICON, PYPROJECT, check, package, run  # noqa: F401 - package: the fixture

VALID: dict[str, Any] = {
    "id": "hello-agent", "name": "Hello", "version": "1.2.3", "description": "A friendly agent",
    "distribution": {"uvx": {"package": "hello-agent==1.2.3"}},
}
SVG = '<svg xmlns="http://www.w3.org/2000/svg" {size}>{body}</svg>'
SQUARE = 'width="16" height="16" viewBox="0 0 16 16"'
DOT = '<circle cx="8" cy="8" r="6" fill="currentColor"/>'


def with_(**fields: Any) -> dict[str, Any]:
    return {**copy.deepcopy(VALID), **fields}


def messages(text: str) -> list[str]:
    return [problem.message for problem in icon_problems(text)]


# -- the icon ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    SVG.format(size=SQUARE, body=DOT),
    SVG.format(size='viewBox="0 0 16 16"', body=DOT),  # no width and height: the viewBox says
    SVG.format(size='width="16px" height="16px"', body='<path stroke="currentColor" fill="none" d="M1 1h14"/>'),
    SVG.format(size=SQUARE, body='<g style="fill: currentColor; stroke:none"><rect width="4" height="4"/></g>'),
    SVG.format(size=SQUARE, body='<style>.a { fill: currentColor }</style><rect class="a" width="4" height="4"/>'),
    SVG.format(size=SQUARE, body='<path fill="inherit" d="M1 1h2"/><path fill="CurrentColor" d="M3 3h2"/>'),
], ids=["attributes", "viewbox-only", "px-and-stroke", "inline-style", "style-element", "inherit-and-case"])
def test_an_icon_drawn_in_current_color_at_16_by_16_passes(text: str):
    assert icon_problems(text) == []


@pytest.mark.parametrize(("text", "said"), [
    (SVG.format(size=SQUARE, body='<!-- made by hand -->' + DOT), "holds an XML comment"),
    (SVG.format(size='width="24" height="24"', body=DOT), "is 24×24, not 16×16"),
    (SVG.format(size='width="16" height="12"', body=DOT), "is 16×12: not square"),
    (SVG.format(size="", body=DOT), "has neither width and height nor a viewBox"),
    (SVG.format(size=SQUARE, body='<circle r="6" fill="#ff0000"/>'), "<circle> has fill '#ff0000': a colour of its own"),
    (SVG.format(size=SQUARE, body=DOT + '<path stroke="red" d="M1 1h2"/>'), "<path> has stroke 'red'"),
    (SVG.format(size=SQUARE, body=DOT + '<g style="fill:rgb(0,0,0)"/>'), "<g> has fill 'rgb(0,0,0)'"),
    (SVG.format(size=SQUARE, body='<style>path { stroke: blue }</style>' + DOT), "<style> has stroke 'blue'"),
    (SVG.format(size=SQUARE, body='<rect width="4" height="4"/>'), "uses no currentColor"),
    ('<html><body/></html>', "its root element is <html>, not <svg>"),
    ('<svg width="16"', "is not well-formed XML"),
], ids=["comment", "24px", "not-square", "no-size", "hex-fill", "named-stroke", "style-fill", "css-stroke",
        "no-current-color", "not-svg", "not-xml"])
def test_an_icon_breaking_a_rule_is_named_by_it(text: str, said: str):
    assert any(said in message for message in messages(text)), messages(text)


# -- the format's new fields ---------------------------------------------------------------------

def test_uvx_may_name_the_command_to_run():
    assert validate(with_(distribution={"uvx": {"package": "hello-agent==1.2.3", "cmd": "hello", "args": ["--acp"]}})) == []
    assert validate(with_(distribution={"uvx": {"package": "hello-agent==1.2.3", "cmd": ""}})) == [
        Problem("distribution.uvx.cmd", "must not be empty")]
    [problem] = validate(with_(distribution={"npx": {"package": "@a/hello@1.2.3", "cmd": "hello"}}))
    assert problem.field == "distribution.npx.cmd" and problem.message.startswith("not a field of the format")


def test_website_and_license_url_are_urls():
    assert validate(with_(website="https://example.com", license_url="https://example.com/LICENSE")) == []
    assert [p.field for p in validate(with_(website="example.com", license_url="LICENSE"))] == ["website", "license_url"]


def test_a_binary_may_pin_its_sha256_and_may_not_be_an_installer():
    target = {"archive": "https://example.com/a.tar.gz", "cmd": "./a", "sha256": "ab" * 32}
    every = {platform: dict(target) for platform in PLATFORMS}
    assert validate(with_(distribution={"binary": every})) == []
    broken = copy.deepcopy(every)
    broken["linux-x86_64"]["sha256"] = "not hex"
    broken["darwin-aarch64"]["archive"] = "https://example.com/a.dmg"
    assert [p.field for p in validate(with_(distribution={"binary": broken}))] == ["distribution.binary.linux-x86_64.sha256"]
    del broken["linux-x86_64"]["sha256"]
    [problem] = validate(with_(distribution={"binary": broken}))
    assert problem.field == "distribution.binary.darwin-aarch64.archive" and "is an installer" in problem.message


def test_the_preview_channel_pins_its_own_version():
    preview = {"version": "1.3.0-preview.2", "distribution": {"npx": {"package": "@a/hello@1.3.0-preview.2"}}}
    assert validate(with_(preview=preview)) == []
    assert validate(with_(preview={**preview, "distribution": {"npx": {"package": "@a/hello@1.3.0-preview.1"}}})) == [
        Problem("preview.distribution.npx.package", "pins 1.3.0-preview.1, not the entry's version 1.3.0-preview.2")]
    assert [p.field for p in validate(with_(preview={**preview, "version": "next"}))] == ["preview.version"]
    binary = {"linux-x86_64": {"archive": "https://example.com/a.tgz", "cmd": "./a"}}
    assert [p.field for p in validate(with_(preview={**preview, "distribution": {"binary": binary}}))] == [
        "preview.distribution.binary"]


# -- writing and checking with them --------------------------------------------------------------



def serve(package: Path) -> str:
    return f"{sys.executable} -m acp_green serve --ephemeral --agent {package / 'hello_agent.py'}:Hello"


def test_without_an_icon_nothing_is_written(package: Path):
    (package / "icon.svg").unlink()
    done = run(package, "--agent", "hello_agent:Hello")
    assert done.returncode == 2 and not (package / "agent.json").exists()
    assert f"Error: icon.svg: none in {package}: the registry requires an icon.svg beside agent.json" in done.stderr


def test_a_bad_icon_is_refused_naming_each_problem(package: Path):
    (package / "icon.svg").write_text(SVG.format(size='width="32" height="32"', body='<rect fill="red"/>'), encoding="utf-8")
    done = run(package, "--agent", "hello_agent:Hello")
    assert done.returncode == 2 and not (package / "agent.json").exists()
    assert "Error: icon.svg: is 32×32, not 16×16" in done.stderr and "Error: icon.svg: <rect> has fill 'red'" in done.stderr


def test_the_icon_goes_beside_a_manifest_written_elsewhere(package: Path):
    entry = package / "registry" / "hello-agent"
    entry.mkdir(parents=True)
    done = run(package, "--agent", "hello_agent:Hello", "--out", str(entry / "agent.json"))
    assert done.returncode == 0, done.stderr
    assert (entry / "icon.svg").read_text() == ICON
    code, checks = check(package, str(entry / "agent.json"), "--command", serve(package))
    assert code == 0 and checks["icon"][0] == "PASS", checks


def test_check_fails_a_missing_or_bad_icon_and_still_runs_the_agent(package: Path):
    assert run(package, "--agent", "hello_agent:Hello").returncode == 0
    (package / "icon.svg").unlink()
    code, checks = check(package, "agent.json", "--command", serve(package))
    assert code == 1
    assert checks["icon"][0] == "FAIL" and checks["icon"][1].startswith(f"none in {package}"), checks["icon"]
    assert checks["authMethods"][0] == "PASS", checks
    (package / "icon.svg").write_text(ICON.replace('fill="currentColor"', 'fill="#000"'), encoding="utf-8")
    done = run(package, "--check", "agent.json", "--command", serve(package))
    assert done.returncode == 1
    assert [line.split(":")[0] for line in done.stdout.splitlines()] == [
        "PASS format", "FAIL icon", "FAIL icon", "PASS start", "PASS initialize", "PASS authMethods"], done.stdout
    assert "FAIL icon: <circle> has fill '#000': a colour of its own" in done.stdout


def test_a_package_whose_only_script_has_another_name_gets_it_as_cmd(package: Path, tmp_path_factory):
    """`uvx --from hello-agent==1.2.3 hello serve --agent hello_agent:Hello`: the manifest names the
    script as `cmd`; --check starts a `cmd` only as the installed package's own console script."""
    (package / "pyproject.toml").write_text(PYPROJECT.replace("hello-agent = ", "hello = "), encoding="utf-8")
    done = run(package, "--agent", "hello_agent:Hello")
    assert done.returncode == 0, done.stderr
    assert json.loads((package / "agent.json").read_text())["distribution"] == {"uvx": {
        "package": "hello-agent==1.2.3", "cmd": "hello", "args": ["serve", "--agent", "hello_agent:Hello"]}}
    # A script of that name on PATH is not the installed package's: the check never runs it.
    bin_dir = tmp_path_factory.mktemp("bin")
    script = bin_dir / "hello"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -m acp_green \"$@\" --ephemeral\n", encoding="utf-8")
    script.chmod(0o755)
    code, checks = check(package, "agent.json", extra_env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert code == 1 and "no console script 'hello' of the installed package 'hello-agent'" in checks["start"][1], checks
    # The cmd of an installed package is started: acp-green's own console script, by its cmd.
    from acp_green.version import __version__

    (package / "agent.json").write_text(json.dumps({
        "id": "acp-green", "name": "acp-green", "version": __version__, "description": "d",
        "distribution": {"uvx": {"package": f"acp-green=={__version__}", "cmd": "acp-green", "args": ["serve", "--ephemeral"]}}}))
    _code, checks = check(package, "agent.json")
    installed = Path(sys.executable).parent / "acp-green"
    assert checks["start"] == ("PASS", f"`{installed} serve --ephemeral` started (this environment's console script "
                                       f"acp-green in place of `uvx --from acp-green=={__version__} acp-green` (no network))"), checks
