"""`serve_stdio` as a script's entry point patches the process itself, when that is still safe:
not after `ssl` was imported, and not when told `monkey_patch=False`. `editor-config` passes
the patching options through like any serve option."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from acp_green.cli import cli
from tests.helpers import REPO, chunk_texts

SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
{before}
from acp_green import serve_stdio
from tests.agents import PatchReportAgent
raise SystemExit(serve_stdio(PatchReportAgent(), log_level="INFO"{extra}))
"""


def serve_script(launch, tmp_path, before: str = "", extra: str = ""):
    script = tmp_path / "entry.py"
    script.write_text(SCRIPT.format(repo=str(REPO), before=before, extra=extra), encoding="utf-8")
    agent = launch(command=[sys.executable, str(script)])
    agent.initialize()
    sid = agent.new_session()
    assert agent.prompt(sid, "?").result() == {"stopReason": "end_turn"}
    agent.close()
    return chunk_texts(agent.updates(sid)), agent.stderr_text()


def test_serve_stdio_patches_a_process_that_imported_nothing_it_replaces(launch, tmp_path):
    said, stderr = serve_script(launch, tmp_path)
    assert said == ["socket patched: True"], stderr
    assert "without gevent monkey-patching" not in stderr


def test_serve_stdio_does_not_patch_after_ssl_and_says_why(launch, tmp_path):
    said, stderr = serve_script(launch, tmp_path, before="import ssl")
    assert said == ["socket patched: False"]
    assert "serving without gevent monkey-patching" in stderr and "ssl was imported already" in stderr, stderr


def test_serve_stdio_can_be_told_not_to_patch(launch, tmp_path):
    said, stderr = serve_script(launch, tmp_path, extra=", monkey_patch=False")
    assert said == ["socket patched: False"]
    assert "without gevent monkey-patching" not in stderr  # asked for: nothing to explain


@pytest.mark.parametrize("options", [["--no-monkey-patch"], ["--monkey-patch", "--block-warning", "2.5"],
                                     ["--block-warning=0"]])
def test_editor_config_passes_the_patching_options_through(options):
    result = CliRunner().invoke(cli, ["editor-config", "zed", *options])
    assert result.exit_code == 0, result.output
    entry = json.loads(result.stdout)["agent_servers"]["acp-green"]
    assert entry["args"][-len(options):] == options


def test_editor_config_refuses_a_bad_block_warning_as_serve_would():
    result = CliRunner().invoke(cli, ["editor-config", "zed", "--block-warning", "-1"])
    assert result.exit_code == 2 and "--block-warning" in result.output


PATCH_AND_REPORT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from importlib import metadata
from gevent import events, monkey
seen = []
events.subscribers.append(lambda event: seen.append(type(event).__name__))
real = metadata.entry_points
from acp_green.process.patching import patch_process, reasons_not_to_patch
safe = reasons_not_to_patch() == []
patch_process()
print(json.dumps({"safe": safe, "patched": monkey.is_module_patched("socket"), "events": seen,
                  "restored": metadata.entry_points is real}))
"""


def test_patch_process_patches_tells_gevents_plugins_and_restores_the_entry_point_lookup():
    done = subprocess.run([sys.executable, "-c", PATCH_AND_REPORT, str(REPO)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["safe"] and report["patched"] and report["restored"]
    assert "GeventWillPatchAllEvent" in report["events"] and "GeventDidPatchAllEvent" in report["events"]
