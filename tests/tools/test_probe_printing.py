"""What `acp-green probe` prints of an agent's text (its answers quoted as evidence, the wire, the
violations' details) is shown, never acted on by the terminal: no ESC, C0 or C1 control reaches
stdout in the table; `--json` gives every string exactly."""

from __future__ import annotations

import json
import re
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_green.tools.rig import probe
from acp_green.tools.rig.invariants import Violation

# What a terminal acts on: C0 controls (ESC, BEL, CR, backspace...) and DEL, the C1 controls,
# the line separators and bidirectional overrides. The table's own newlines end its lines.
_ACTED_ON = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_HOSTILE = st.sampled_from(["\x1b]0;owned\x07", "\x1b]52;c;cm0gLXJmIH4=\x07", "\x1b[2J", "\x9b31m", "\x9d0;t\x9c", "\r", "\x08",
                            "\n", "\t", "\x00", "\x7f", "\u202e", "\u2028", "é", "a", " "]) | st.characters()
_TEXT = st.lists(_HOSTILE, max_size=12).map("".join)


@settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(evidence=_TEXT, wire=st.lists(_TEXT, max_size=3), detail=_TEXT, quoted=_TEXT, offered=_TEXT)
def test_no_control_character_of_an_agent_reaches_the_terminal_and_json_stays_exact(capsys, evidence, wire, detail, quoted, offered):
    report = probe.ProbeReport(["agent"], offered_file=offered)
    report.results.append(probe.CheckResult("initialize", probe.FAIL, evidence, wire=wire, basis=evidence))
    report.advisories.append(probe.CheckResult("tool calls", probe.WARN, evidence, force=probe.ADVISORY, wire=wire))
    report.violations.append(Violation("schema", detail, (quoted,)))
    with mock.patch.object(probe, "run_probe", lambda *_args, **_kwargs: report):
        assert probe.main(probe.ProbeConfig(["agent"])) == 1
        table = capsys.readouterr().out
        assert probe.main(probe.ProbeConfig(["agent"]), as_json=True) == 1
        given_back = json.loads(capsys.readouterr().out)
    assert not _ACTED_ON.search(table), repr(table)
    assert "initialize" in table and "schema" in table
    assert [row["evidence"] for row in given_back["checks"] if row["check"] == "initialize"] == [evidence]
    assert json.dumps(detail) in json.dumps(given_back)
