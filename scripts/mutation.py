"""Mutation testing of the runtime and the rig's verdict code with cosmic-ray (run through scripts/mutation.sh).

Every module in MODULES is mutated one line at a time against the fastest test files that claim
it (unit and in-process tests first), and belongs to one group of modules that a sample is drawn
for: `--quick N` tests N mutants per GROUP, spread over the group's modules (see `allocate`).

The run happens in a scratch copy of the working tree (.mutation/tree): cosmic-ray writes each
mutant into the source file on disk, so the tests -- including any that start `python -m acp_green`
in a subprocess -- import the mutant, and the real tree is never touched (an interrupted run
leaves nothing to restore, and tests can be edited meanwhile). Every test command runs with
PYTHONPATH set to that copy, so whichever virtualenv runs this (an editable install of another
checkout, say) the copy's acp_green is the one imported.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import WorkerOutcome, WorkResult

ROOT = Path(__file__).resolve().parent.parent
STATE = ROOT / ".mutation"
TREE = STATE / "tree"

# THE TABLE. module name -> (group, path to mutate, test files run against each of its mutants).
# Test files: unit and in-process ones first (the run stops at the first failing test), only the
# fast tier (`-m "not slow"` is added); chosen by the share of the module's lines each file runs
# (measured with coverage, the agents it starts included) and by speed. A file that is not at its path is looked for by its name
# anywhere under tests/ (the test files are being moved into subject folders), and left out with
# a note if it is nowhere.
MODULES: dict[str, tuple[str, str, list[str]]] = {
    # -- bytes: framing, descriptors, the hub; errors and counters -----------------------------
    "wire": ("bytes", "acp_green/rpc/wire.py", ["tests/wire/test_strict_json.py", "tests/wire/test_wire.py"]),
    "transport": ("bytes", "acp_green/rpc/transport.py", [
        "tests/transport/test_outbound.py", "tests/transport/test_line_reader.py",
        "tests/e2e/test_rules_in_process.py", "tests/endpoint/test_input_guard.py",
    ]),
    "stderrsink": ("bytes", "acp_green/process/stderrsink.py", ["tests/transport/test_stderr_sink.py"]),
    "fairness": ("bytes", "acp_green/rpc/fairness.py", [
        "tests/transport/test_outbound.py", "tests/e2e/test_rules_in_process.py",
        "tests/sessions/test_history_flow.py",
    ]),
    "heap": ("bytes", "acp_green/process/heap.py", ["tests/cli/test_heap.py"]),
    "version": ("bytes", "acp_green/version.py", ["tests/package/test_public_names.py"]),
    "errors": ("bytes", "acp_green/errors.py", [
        "tests/endpoint/test_errors_map.py", "tests/endpoint/test_protocol_shape.py",
        "tests/endpoint/test_endpoint.py", "tests/endpoint/test_hostile_params.py", "tests/mcp/test_stdio_link.py",
        "tests/wire/test_strict_json.py", "tests/agent/test_turn_client_facing.py",
    ]),
    "stats": ("bytes", "acp_green/process/stats.py", ["tests/endpoint/test_protocol_shape.py", "tests/cli/test_heap.py"]),
    "redact": ("bytes", "acp_green/redact.py", ["tests/mcp/test_redaction.py"]),
    "terminal_text": ("bytes", "acp_green/terminal_text.py", [
        "tests/tools/test_probe_printing.py", "tests/store/test_inspection.py",
    ]),
    "tracing": ("bytes", "acp_green/tracing.py", [
        "tests/wire/test_trace_events.py", "tests/transport/test_trace_writer.py", "tests/tools/test_record.py",
    ]),
    # -- json-rpc: requests, responses, ids, admission -----------------------------------------
    "endpoint": ("json-rpc", "acp_green/rpc/endpoint.py", [
        "tests/endpoint/test_endpoint.py", "tests/endpoint/test_background_drain.py",
        "tests/endpoint/test_method_table.py", "tests/endpoint/test_rules_unit.py",
        "tests/endpoint/test_input_guard.py", "tests/transport/test_shutdown_stop.py",
        "tests/e2e/test_rules_in_process.py",
        "tests/endpoint/test_batches.py",
    ]),
    "batch": ("json-rpc", "acp_green/rpc/batch.py", ["tests/endpoint/test_batches.py", "tests/e2e/test_batches.py"]),
    "params": ("json-rpc", "acp_green/rpc/params.py", [
        "tests/endpoint/test_protocol_shape.py", "tests/endpoint/test_input_guard.py",
        "tests/endpoint/test_hostile_params.py",
    ]),
    "outgoing": ("json-rpc", "acp_green/rpc/outgoing.py", [
        "tests/endpoint/test_rpc_plumbing.py", "tests/e2e/test_nan_wait.py", "tests/endpoint/test_endpoint.py",
        "tests/mcp/test_stdio_link.py", "tests/agent/test_terminals.py",
    ]),
    "client_requests": ("json-rpc", "acp_green/rpc/client_requests.py", [
        "tests/endpoint/test_rpc_plumbing.py", "tests/endpoint/test_endpoint.py",
        "tests/endpoint/test_feature_registration.py", "tests/agent/test_turn_client_facing.py",
    ]),
    # -- state: sessions and their cancel tokens, usage, the store -----------------------------
    "sessions": ("state", "acp_green/sessions.py", [
        "tests/sessions/test_registry.py", "tests/endpoint/test_rules_unit.py",
        "tests/sessions/test_session_methods.py", "tests/agent/test_update_checks.py",
    ]),
    "cancel": ("state", "acp_green/rpc/cancel.py", [
        "tests/sessions/test_cancel_token.py", "tests/sessions/test_registry.py", "tests/e2e/test_nan_wait.py",
    ]),
    "usage": ("state", "acp_green/usage.py", [
        "tests/store/test_usage_bytes.py", "tests/endpoint/test_input_guard.py", "tests/store/test_rules.py",
    ]),
    "store": ("state", "acp_green/store", [
        "tests/store/test_contract.py", "tests/store/test_rules.py", "tests/store/test_sqlite.py",
        "tests/store/test_text.py", "tests/store/test_report.py", "tests/store/test_statedb_rows.py",
        "tests/store/test_two_processes.py", "tests/store/test_fork_shares_history.py", "tests/store/test_postgres.py",
    ]),
    # -- protocol: what each ACP method means ------------------------------------------------------
    "protocol": ("protocol", "acp_green/protocol/__init__.py", [
        "tests/endpoint/test_rules_unit.py", "tests/transport/test_shutdown_stop.py",
        "tests/e2e/test_rules_in_process.py",
    ]),
    "protocol.access": ("protocol", "acp_green/protocol/access.py", [
        "tests/endpoint/test_protocol_shape.py", "tests/agent/test_logout.py",
    ]),
    "protocol.connection": ("protocol", "acp_green/protocol/connection.py", [
        "tests/endpoint/test_protocol_shape.py", "tests/endpoint/test_feature_registration.py",
        "tests/agent/test_rich_prompts.py", "tests/agent/test_logout.py",
    ]),
    "protocol.prompt": ("protocol", "acp_green/protocol/prompt.py", [
        "tests/endpoint/test_prompt_cancelled_before_start.py", "tests/endpoint/test_rules_unit.py",
        "tests/endpoint/test_input_guard.py", "tests/agent/test_rich_prompts.py",
        "tests/agent/test_turn_client_facing.py",
    ]),
    "protocol.interrupt": ("protocol", "acp_green/protocol/interrupt.py", [
        "tests/endpoint/test_cancel_interrupt.py", "tests/cli/test_cancel_interrupts.py",
    ]),
    "protocol.replay": ("protocol", "acp_green/protocol/replay.py", [
        "tests/sessions/test_history_flow.py", "tests/sessions/test_session_methods.py",
        "tests/sessions/test_history_edges.py", "tests/sessions/test_replayed_settings.py",
    ]),
    "protocol.session_mcp": ("protocol", "acp_green/protocol/session_mcp.py", [
        "tests/mcp/test_rules_unit.py", "tests/mcp/test_units.py", "tests/mcp/test_limits.py",
    ]),
    "protocol.session_admin": ("protocol", "acp_green/protocol/session_admin.py", [
        "tests/sessions/test_session_admin.py", "tests/sessions/test_session_admin_inputs.py",
    ]),
    "protocol.session_methods": ("protocol", "acp_green/protocol/session_methods.py", [
        "tests/sessions/test_session_methods.py", "tests/endpoint/test_rules_unit.py",
        "tests/agent/test_session_settings.py", "tests/endpoint/test_input_guard.py",
    ]),
    "protocol.turn_record": ("protocol", "acp_green/protocol/turn_record.py", [
        "tests/sessions/test_turn_record_pieces.py", "tests/sessions/test_history_flow.py",
        "tests/agent/test_turn_client_facing.py",
    ]),
    "protocol.updates": ("protocol", "acp_green/protocol/updates.py", [
        "tests/sessions/test_history_flow.py", "tests/wire/test_wire.py", "tests/endpoint/test_rules_unit.py",
    ]),
    "protocol.dialect_v2": ("protocol", "acp_green/protocol/dialect_v2.py", [
        "tests/endpoint/test_dialect_v2.py", "tests/e2e/test_v2_over_pipes.py",
    ]),
    "protocol.v2_methods": ("protocol", "acp_green/protocol/v2_methods.py", ["tests/agent/test_v2_methods.py"]),
    "protocol.dialect": ("protocol", "acp_green/protocol/dialect.py", [
        "tests/endpoint/test_dialect_v2.py", "tests/agent/test_v2_methods.py", "tests/endpoint/test_protocol_shape.py",
    ]),
    # -- agent-api: what an agent author sees ---------------------------------------------------
    "package": ("agent-api", "acp_green/__init__.py", ["tests/package/test_public_names.py"]),
    "agent": ("agent-api", "acp_green/agent.py", [
        "tests/endpoint/test_rules_unit.py", "tests/agent/test_turn_client_facing.py",
        "tests/agent/test_session_settings.py", "tests/agent/test_rich_prompts.py",
        "tests/agent/test_content_and_elicitation.py", "tests/agent/test_terminals.py",
        "tests/agent/test_update_checks.py", "tests/agent/test_tool_call_ids.py",
    ]),
    "turn_output": ("agent-api", "acp_green/turn_output.py", [
        "tests/agent/test_turn_client_facing.py", "tests/agent/test_update_checks.py",
        "tests/agent/test_tool_call_ids.py", "tests/agent/test_notices_and_compaction.py", "tests/agent/test_v2_methods.py",
    ]),
    "turn_requests": ("agent-api", "acp_green/turn_requests.py", [
        "tests/agent/test_turn_client_facing.py", "tests/agent/test_update_checks.py", "tests/agent/test_read_answer_shapes.py",
        "tests/agent/test_content_and_elicitation.py", "tests/agent/test_v2_methods.py",
    ]),
    "turn_runtime": ("agent-api", "acp_green/turn_runtime.py", [
        "tests/agent/test_session_settings.py", "tests/agent/test_terminals.py", "tests/agent/test_v2_methods.py",
        "tests/sessions/test_history_edges.py", "tests/sessions/test_session_state.py",
    ]),
    "update_checks": ("agent-api", "acp_green/update_checks.py", [
        "tests/agent/test_update_checks.py", "tests/agent/test_tool_call_ids.py",
    ]),
    "context": ("agent-api", "acp_green/context.py", [
        "tests/endpoint/test_rules_unit.py", "tests/endpoint/test_input_guard.py",
        "tests/endpoint/test_protocol_shape.py",
    ]),
    "paths": ("agent-api", "acp_green/paths.py", ["tests/agent/test_turn_client_facing.py"]),
    "blocks": ("agent-api", "acp_green/blocks.py", ["tests/agent/test_rich_prompts.py"]),
    "conversation": ("agent-api", "acp_green/conversation.py", ["tests/agent/test_conversation_memory.py", "tests/store/test_conversation_pages.py"]),
    "settings": ("agent-api", "acp_green/settings.py", [
        "tests/agent/test_session_settings.py", "tests/sessions/test_session_methods.py",
        "tests/sessions/test_replayed_settings.py",
    ]),
    "terminals": ("agent-api", "acp_green/terminals.py", [
        "tests/agent/test_terminal_release.py", "tests/agent/test_terminals.py",
    ]),
    "elicitation": ("agent-api", "acp_green/elicitation.py", ["tests/agent/test_content_and_elicitation.py"]),
    "content": ("agent-api", "acp_green/content.py", [
        "tests/agent/test_content_and_elicitation.py", "tests/agent/test_update_checks.py",
    ]),
    "tool_call_tokens": ("agent-api", "acp_green/tool_call_tokens.py", ["tests/agent/test_v2_methods.py"]),
    # -- mcp: MCP-over-ACP and the MCP client --------------------------------------------------------
    "mcp": ("mcp", "acp_green/mcp", [
        "tests/mcp/test_stdio_link.py", "tests/mcp/test_rules_unit.py", "tests/mcp/test_units.py",
        "tests/mcp/test_outbound.py", "tests/mcp/test_limits.py",
    ]),
    # -- server: the wiring, signals, the order of shutdown -------------------------------------
    "server": ("server", "acp_green/server.py", [
        "tests/transport/test_shutdown_stop.py", "tests/e2e/test_rules_in_process.py",
        "tests/transport/test_shutdown_edges.py",
    ]),
    "client_connection": ("server", "acp_green/client_connection.py", [
        "tests/transport/test_shutdown_stop.py", "tests/e2e/test_rules_in_process.py", "tests/remote/test_listen_connections.py",
    ]),
    "serve_options": ("server", "acp_green/serve_options.py", ["tests/e2e/test_rules_in_process.py"]),
    "channel": ("bytes", "acp_green/rpc/channel.py", ["tests/remote/test_event_streams.py", "tests/transport/test_line_reader.py"]),
    # -- remote: WebSocket and Streamable HTTP --------------------------------------------------
    "remote": ("remote", "acp_green/remote/__init__.py", ["tests/remote/test_listen_options.py"]),
    "remote_options": ("remote", "acp_green/remote/options.py", [
        "tests/remote/test_listen_options.py", "tests/remote/test_listen_inprocess.py", "tests/remote/test_listen_http.py",
    ]),
    "remote_auth": ("remote", "acp_green/remote/auth.py", ["tests/remote/test_listen_options.py", "tests/remote/test_listen_connections.py"]),
    "event_streams": ("remote", "acp_green/remote/event_streams.py", [
        "tests/remote/test_event_streams.py", "tests/remote/test_listen_http.py",
    ]),
    "remote_http": ("remote", "acp_green/remote/http.py", [
        "tests/remote/test_listen_http.py", "tests/remote/test_review_http.py", "tests/remote/test_listen_inprocess.py",
    ]),
    "remote_routes": ("remote", "acp_green/remote/routes.py", [
        "tests/remote/test_listen_http.py", "tests/remote/test_listen_connections.py", "tests/remote/test_review_http.py",
    ]),
    "remote_listener": ("remote", "acp_green/remote/listener.py", [
        "tests/remote/test_listen_http.py", "tests/remote/test_listen_inprocess.py",
    ]),
    "websocket": ("remote", "acp_green/remote/websocket.py", ["tests/remote/test_listen_connections.py"]),
    "logsetup": ("server", "acp_green/process/logsetup.py", [
        "tests/e2e/test_rules_in_process.py", "tests/transport/test_stderr_sink.py",
    ]),
    "blockwatch": ("server", "acp_green/process/blockwatch.py", [
        "tests/transport/test_blockwatch.py", "tests/cli/test_unpatched_block_warning.py",
    ]),
    "patching": ("server", "acp_green/process/patching.py", [
        "tests/cli/test_serve_stdio_patching.py", "tests/cli/test_unpatched_block_warning.py", "tests/cli/test_entry_patching.py",
    ]),
    # -- command-line: parsing options, loading the agent, the demo agent ----------------------
    "cli": ("command-line", "acp_green/cli.py", [
        "tests/cli/test_first_use.py", "tests/cli/test_entry_patching.py", "tests/cli/test_process.py",
        "tests/store/test_state_dir_private.py",
    ]),
    "agentspec": ("command-line", "acp_green/agentspec.py", ["tests/cli/test_first_use.py"]),
    "editorconfig": ("command-line", "acp_green/editorconfig.py", ["tests/cli/test_first_use.py"]),
    "demo": ("command-line", "acp_green/demo.py", [
        "tests/agent/test_demo_commands.py", "tests/endpoint/test_rules_unit.py",
        "tests/agent/test_turn_client_facing.py", "tests/agent/test_content_and_elicitation.py",
        "tests/agent/test_terminals.py",
    ]),
    # -- rig-verdicts: the rig's judgements of an agent ---------------------------------------------
    "rig.probe": ("rig-verdicts", "acp_green/tools/rig/probe.py", [
        "tests/tools/test_probe_busy_prompt.py", "tests/tools/test_probe_verdicts.py", "tests/tools/test_probe_truth.py",
        "tests/tools/test_probe.py",
    ]),
    "rig.soak": ("rig-verdicts", "acp_green/tools/rig/soak.py", [
        "tests/tools/test_soak_samples.py", "tests/tools/test_soak.py", "tests/tools/test_soak_orphans.py",
    ]),
    "rig.growth": ("rig-verdicts", "acp_green/tools/rig/growth.py", [
        "tests/tools/test_soak_verdict.py", "tests/tools/test_soak.py", "tests/tools/test_soak_samples.py",
    ]),
    "rig.reaper": ("rig-verdicts", "acp_green/tools/rig/reaper.py", [
        "tests/tools/test_reaper_launched.py", "tests/tools/test_probe_busy_prompt.py",
        "tests/tools/test_teardown_checks.py", "tests/tools/test_rig_fault_agents.py",
        "tests/tools/test_soak_orphans.py",
    ]),
    "rig.schema_v2": ("rig-verdicts", "acp_green/tools/rig/schema_v2.py", [
        "tests/tools/test_probe_truth.py", "tests/tools/test_schema_validator.py",
    ]),
    "rig.invariants": ("rig-verdicts", "acp_green/tools/rig/invariants.py", [
        "tests/tools/test_rig_invariants.py", "tests/tools/test_invariant_findings.py", "tests/tools/test_probe_truth.py",
        "tests/tools/test_teardown_checks.py", "tests/tools/test_rig_fault_agents.py",
        "tests/endpoint/test_input_guard.py",
    ]),
    "rig.invariant_findings": ("rig-verdicts", "acp_green/tools/rig/invariant_findings.py", [
        "tests/tools/test_invariant_findings.py", "tests/tools/test_rig_invariants.py", "tests/tools/test_trace_check.py",
    ]),
    "rig.invariant_lines": ("rig-verdicts", "acp_green/tools/rig/invariant_lines.py", [
        "tests/tools/test_rig_invariants.py", "tests/tools/test_invariant_findings.py", "tests/tools/test_probe_truth.py",
        "tests/tools/test_trace_check.py", "tests/tools/test_trace_batches.py", "tests/tools/test_teardown_checks.py",
    ]),
    "rig.invariant_prompts": ("rig-verdicts", "acp_green/tools/rig/invariant_prompts.py", [
        "tests/tools/test_rig_invariants.py", "tests/tools/test_probe_truth.py", "tests/tools/test_trace_check.py",
        "tests/tools/test_teardown_checks.py", "tests/tools/test_rig_fault_agents.py",
    ]),
    "rig.chat_answers": ("rig-verdicts", "acp_green/tools/rig/chat_answers.py", [
        "tests/tools/test_chat_answers.py", "tests/tools/test_chat_ask_eof.py",
    ]),
    "rig.chat_ask": ("rig-verdicts", "acp_green/tools/rig/chat_ask.py", [
        "tests/tools/test_chat_ask_eof.py", "tests/tools/test_chat_pipe.py",
    ]),
    "rig.chat_files": ("rig-verdicts", "acp_green/tools/rig/chat_files.py", ["tests/tools/test_chat_answers.py"]),
    # -- trace: the trace tools' readings of a recorded conversation ----------------------------------
    "trace.html": ("trace", "acp_green/tools/trace/html.py", [
        "tests/tools/test_trace_html.py", "tests/tools/test_trace_html_browser.py",
    ]),
    "trace.read": ("trace", "acp_green/tools/trace/read.py", [
        "tests/tools/test_trace_read.py", "tests/tools/test_trace_check.py",
    ]),
    "trace.check": ("trace", "acp_green/tools/trace/check.py", ["tests/tools/test_trace_check.py"]),
    "trace.show": ("trace", "acp_green/tools/trace/show.py", ["tests/tools/test_trace_show.py"]),
    "trace.replay": ("trace", "acp_green/tools/trace/replay.py", ["tests/tools/test_trace_replay.py"]),
    "trace.record": ("trace", "acp_green/tools/trace/record.py", ["tests/tools/test_record.py"]),
    "trace.record_lines": ("trace", "acp_green/tools/trace/record_lines.py", [
        "tests/tools/test_record_lines.py", "tests/tools/test_record.py",
    ]),
    # -- publish: the registry manifest, written and checked -------------------------------------------
    "publish.format": ("publish", "acp_green/tools/publish/format.py", [
        "tests/tools/test_manifest_format.py", "tests/tools/test_manifest_registry_rules.py", "tests/tools/test_manifest.py",
    ]),
    "publish.icon": ("publish", "acp_green/tools/publish/icon.py", [
        "tests/tools/test_manifest_registry_rules.py", "tests/tools/test_manifest.py",
    ]),
    "publish.metadata": ("publish", "acp_green/tools/publish/metadata.py", [
        "tests/tools/test_manifest_format.py", "tests/tools/test_manifest.py",
    ]),
    "publish.manifest": ("publish", "acp_green/tools/publish/manifest.py", ["tests/tools/test_manifest.py"]),
    "publish.check": ("publish", "acp_green/tools/publish/check.py", ["tests/tools/test_manifest.py"]),
    "publish.command": ("publish", "acp_green/tools/publish/command.py", ["tests/tools/test_manifest.py"]),
    # -- `acp-green new`: the project it makes -----------------------------------------------------
    "newproject": ("command-line", "acp_green/tools/newproject/project.py", [
        "tests/tools/test_newproject.py", "tests/tools/test_newproject_ci.py",
    ]),
    "newproject.source": ("command-line", "acp_green/tools/newproject/source.py", ["tests/tools/test_newproject_ci.py"]),
    # -- testing: the pytest plugin for agent authors, judged through an author's test run ------------
    "testing": ("testing", "acp_green/testing/__init__.py", ["tests/tools/test_testing_plugin.py"]),
    "testing.turns": ("testing", "acp_green/testing/turns.py", ["tests/tools/test_testing_plugin.py"]),
    "testing.editor": ("testing", "acp_green/testing/editor.py", ["tests/tools/test_testing_plugin.py"]),
    "testing.client": ("testing", "acp_green/testing/client.py", ["tests/tools/test_testing_plugin_sessions.py", "tests/tools/test_testing_plugin.py"]),
    "testing.serving": ("testing", "acp_green/testing/serving.py", ["tests/tools/test_testing_plugin.py"]),
    "testing.probe": ("testing", "acp_green/testing/probe.py", ["tests/tools/test_testing_plugin.py"]),
}
GROUPS: list[str] = list(dict.fromkeys(group for group, _path, _tests in MODULES.values()))

# The careless one-line edits worth a test run each. Left out: arithmetic turned into exotic
# operators (**, <<, |, %, //, /: a second, rarely distinct mutant per `+`), comparisons turned
# into ones no edit produces (`==` into `<`, `<` into `is`), and the variable operators (random).
INCLUDED_OPERATORS = re.compile(
    r"core/("
    r"ReplaceBinaryOperator_\w+_(Add|Sub|Mul)"
    r"|ReplaceComparisonOperator_(Eq_NotEq|NotEq_Eq|Lt_LtE|LtE_Lt|Gt_GtE|GtE_Gt|Lt_GtE|GtE_Lt|Gt_LtE|LtE_Gt"
    r"|Is_IsNot|IsNot_Is|Eq_Is|Is_Eq)"
    r"|ReplaceUnaryOperator_\w+|AddNot|ReplaceTrueWithFalse|ReplaceFalseWithTrue|ReplaceAndWithOr"
    r"|ReplaceOrWithAnd|ReplaceBreakWithContinue|ReplaceContinueWithBreak|ExceptionReplacer"
    r"|NumberReplacer|RemoveDecorator|ZeroIterationForLoop"
    r")$"
)


def annotation_spans(path: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where a module's annotations are, if they are never evaluated (`from __future__ import
    annotations`): a mutant there (`bytes | str` into `bytes * str`) is equivalent by construction."""
    tree = ast.parse(path.read_text())
    lazy = any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
               and any(alias.name == "annotations" for alias in node.names) for node in tree.body)
    if not lazy:
        return []
    spans = []
    for node in ast.walk(tree):
        found = []
        if isinstance(node, ast.arg) and node.annotation is not None:
            found.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
        spans += [((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)) for n in found]
    return spans


def in_annotation(mutation, spans: dict[str, list]) -> bool:
    where = str(mutation.module_path)
    if where not in spans:
        spans[where] = annotation_spans(TREE / where)
    position = tuple(mutation.start_pos)
    return any(start <= position < end for start, end in spans[where])


def copy_tree() -> None:
    """The working tree as it stands (tracked and untracked, not ignored) into TREE."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, check=True, capture_output=True).stdout.split(b"\0")
    if TREE.exists():
        shutil.rmtree(TREE)
    for name in filter(None, files):
        source = ROOT / name.decode()
        if source.is_file():
            target = TREE / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def test_files(name: str) -> list[str]:
    """The module's test files as they are in TREE: at their path, else found by name under tests/."""
    found = []
    for wanted in MODULES[name][2]:
        if (TREE / wanted).exists():
            found.append(wanted)
            continue
        moved = sorted(str(p.relative_to(TREE)) for p in (TREE / "tests").rglob(Path(wanted).name))
        if len(moved) == 1:
            found.append(moved[0])
        else:
            print(f"[{name}] note: {wanted} " + ("is at several places: " + ", ".join(moved) if moved else "does not exist")
                  + "; left out (update MODULES)")
    return found


def test_command(files: list[str]) -> list[str]:
    # One process, stop at the first failure: a killed mutant costs one failing test.
    return [sys.executable, "-m", "pytest", "-x", "-q", "-rf", "-p", "no:cacheprovider", "-p", "no:xdist",
            "-p", "no:randomly", "-o", "addopts=", "-m", "not slow", *files]


def write_config(name: str, command: list[str], timeout: float) -> Path:
    config = STATE / f"{name}.toml"
    quoted = " ".join(arg if re.fullmatch(r"[\w./:=-]+", arg) else repr(arg) for arg in command)
    config.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{MODULES[name][1]}"\n'
        f"timeout = {timeout:.0f}\n"
        "excluded-modules = []\n"
        f'test-command = "{quoted}"\n'
        "[cosmic-ray.distributor]\n"
        'name = "local"\n'
    )
    return config


def cosmic_ray(*args: str) -> None:
    subprocess.run([str(Path(sys.executable).parent / "cosmic-ray"), *args], cwd=TREE, check=True)


def key(mutation) -> tuple[str, str, int]:
    return (str(mutation.module_path), mutation.operator_name, mutation.occurrence)


def previous_results(db_path: Path) -> dict[tuple[str, str, int], WorkResult]:
    if not db_path.exists():
        return {}
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        return {key(item.mutations[0]): result for item, result in db.completed_work_items
                if result.worker_outcome != WorkerOutcome.SKIPPED}


def enumerate_mutants(name: str, command: list[str]) -> tuple[Path, list]:
    """A fresh session database of every mutant of the module; returns it and the eligible ones."""
    config = write_config(name, command, 90)  # the timeout is set again after the baseline
    db_path = STATE / f"{name}.sqlite"
    if db_path.exists():
        db_path.unlink()
    cosmic_ray("init", str(config), str(db_path))
    spans: dict[str, list] = {}
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        eligible = [item for item in db.pending_work_items if INCLUDED_OPERATORS.match(item.mutations[0].operator_name)
                    and not in_annotation(item.mutations[0], spans)]
    return db_path, eligible


def allocate(n: int, sizes: dict[str, int], rng: random.Random) -> dict[str, int]:
    """How many of a group's N sampled mutants each of its modules gets.

    Every module with mutants gets one first, while N lasts (when N is smaller than the number of
    modules, which ones is drawn at random, weighted by their mutant counts); the rest of N is
    shared in proportion to the mutants each module has left (largest remainder), never more
    than a module has. So a sample covers every module of the group, and the big ones more.
    """
    share = {name: 0 for name in sizes}
    candidates = [name for name, size in sizes.items() if size > 0]
    if n < len(candidates):
        chosen: list[str] = []
        while len(chosen) < n:
            pool = [name for name in candidates if name not in chosen]
            chosen.append(rng.choices(pool, weights=[sizes[name] for name in pool])[0])
        return {name: int(name in chosen) for name in sizes}
    for name in candidates:
        share[name] = 1
    left = n - len(candidates)
    while left > 0:
        room = {name: sizes[name] - share[name] for name in candidates if sizes[name] > share[name]}
        if not room:
            break
        total = sum(room.values())
        exact = {name: left * r / total for name, r in room.items()}
        given = {name: min(room[name], int(exact[name])) for name in room}
        rest = left - sum(given.values())
        for name in sorted(room, key=lambda m: exact[m] - int(exact[m]), reverse=True):
            if rest <= 0:
                break
            if given[name] < room[name]:
                given[name] += 1
                rest -= 1
        for name, extra in given.items():
            share[name] += extra
        left -= sum(given.values())
        if not any(given.values()):
            break
    return share


def select(names: list[str], args: argparse.Namespace) -> dict[str, tuple[Path, list[str], int]]:
    """Enumerate the mutants of each module and mark the ones not to run as skipped.

    Returns, per module with mutants to run: its database, its test files and how many will run.
    With --survivors, the mutants of the last run (no new sample), those killed then keeping
    their result.
    """
    prepared: dict[str, tuple[Path, list[str], list]] = {}
    earlier: dict[str, dict[tuple[str, str, int], WorkResult]] = {}
    for name in names:
        files = test_files(name)
        earlier[name] = previous_results(STATE / f"{name}.sqlite") if args.survivors else {}
        db_path, eligible = enumerate_mutants(name, test_command(files))
        if args.survivors:  # the same mutants as last time; the ones killed then keep their result
            eligible = [item for item in eligible if key(item.mutations[0]) in earlier[name]]
        prepared[name] = (db_path, files, eligible)
        print(f"[{name}] {len(eligible)} mutants eligible", flush=True)
    if args.quick is not None and not args.survivors:
        for group in GROUPS:
            members = [name for name in names if MODULES[name][0] == group]
            if not members:
                continue
            shares = allocate(args.quick, {name: len(prepared[name][2]) for name in members},
                              random.Random(f"{args.seed}:{group}"))
            for name in members:
                db_path, files, eligible = prepared[name]
                rng = random.Random(f"{args.seed}:{name}")
                prepared[name] = (db_path, files, rng.sample(eligible, shares[name]))
    selected: dict[str, tuple[Path, list[str], int]] = {}
    for name, (db_path, files, chosen_items) in prepared.items():
        chosen = {item.job_id for item in chosen_items}
        with use_db(str(db_path)) as db:
            pending = list(db.pending_work_items)
            db.set_multiple_results([item.job_id for item in pending if item.job_id not in chosen],
                                    WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output="not selected"))
            for item in chosen_items:
                result = earlier[name].get(key(item.mutations[0]))
                if result is not None and result.is_killed:
                    db.set_result(item.job_id, result)
            runs = len(list(db.pending_work_items))
        print(f"[{name}] {len(chosen)} mutants selected", flush=True)
        if runs:
            selected[name] = (db_path, files, runs)
    return selected


def run(name: str, db_path: Path, files: list[str]) -> None:
    """Baseline (the tests must pass without a mutant), then every selected mutant of the module."""
    command = test_command(files)
    print(f"[{name}] baseline: {' '.join(files)}", flush=True)
    started = time.monotonic()
    baseline = subprocess.run(command, cwd=TREE, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    if baseline.returncode != 0:
        print(f"[{name}] the tests fail without any mutant; fix them first:\n{baseline.stdout[-3000:]}")
        return
    # Generous: the machine may be shared, and a survivor slowed past the timeout would count as killed.
    timeout = max(90.0, 5 * elapsed)
    print(f"[{name}] baseline green in {elapsed:.1f}s; mutant timeout {timeout:.0f}s", flush=True)
    config = write_config(name, command, timeout)
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        runs = len(list(db.pending_work_items))
    started = time.monotonic()
    cosmic_ray("exec", str(config), str(db_path))
    took = time.monotonic() - started
    (STATE / f"{name}.time.json").write_text(json.dumps({"mutants": runs, "seconds": took, "baseline": elapsed}))
    print(f"[{name}] {runs} mutants in {took:.0f}s ({took / max(runs, 1):.1f}s each)", flush=True)


def mutated_line(diff: str | None) -> str:
    added = [line[1:].strip() for line in (diff or "").splitlines() if line.startswith("+") and not line.startswith("+++")]
    return added[0] if added else "?"


_FAILED_TEST = re.compile(r"^(?:FAILED (\S+?)(?: - .*)?|_{3,} (\S+) _{3,})$", re.M)


def killer(output: str | None) -> str | None:
    """The test that failed first under a mutant (the run stops at the first failure)."""
    found = _FAILED_TEST.search(output or "")
    return (found.group(1) or found.group(2)) if found else None


def module_results(name: str, show_killers: bool, survivors: list[str], killers: list[str]) -> tuple[int, int, int, int] | None:
    """(killed, tested, not run, killed by timeout) of the module's last run; None if it never ran."""
    db_path = STATE / f"{name}.sqlite"
    if not db_path.exists():
        return None
    killed = count = timeouts = 0
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        pending = len(list(db.pending_work_items))
        for item, result in db.completed_work_items:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            count += 1
            m = item.mutations[0]
            if result.is_killed:
                killed += 1
                timeouts += result.output == "timeout"
                by = killer(result.output)
                if show_killers and by:
                    killers.append(f"  {by}: {m.module_path}:{m.start_pos[0]} {m.operator_name}: {mutated_line(result.diff)}")
            else:
                survivors.append(f"  {m.module_path}:{m.start_pos[0]} {m.operator_name} #{m.occurrence}"
                                 f" in {m.definition_name or '-'}: {mutated_line(result.diff)}")
    return killed, count, pending, timeouts


def seconds_per_mutant(names: list[str]) -> str:
    mutants = seconds = 0.0
    for name in names:
        timing = STATE / f"{name}.time.json"
        if timing.exists():
            figures = json.loads(timing.read_text())
            mutants += figures["mutants"]
            seconds += figures["seconds"]
    return f"{seconds / mutants:6.1f}" if mutants else "     -"


def score(killed: int, count: int) -> str:
    return f"{100 * killed / count:6.1f}%" if count else "     -"


def report(names: list[str], show_killers: bool = False) -> int:
    survivors: list[str] = []
    killers: list[str] = []
    total_killed = total = 0
    print(f"\n{'group / module':<26} killed/total   score  s/mutant")
    for group in GROUPS:
        members = [name for name in names if MODULES[name][0] == group]
        rows = []
        group_killed = group_count = 0
        for name in members:
            found = module_results(name, show_killers, survivors, killers)
            if found is None:
                continue
            killed, count, pending, timeouts = found
            note = f"  ({timeouts} by timeout)" if timeouts else ""
            note += f"  ({pending} not run)" if pending else ""
            rows.append(f"  {name:<24} {killed:>5}/{count:<6} {score(killed, count)}  {seconds_per_mutant([name])}{note}")
            group_killed += killed
            group_count += count
        if not rows:
            continue
        print(f"{group:<26} {group_killed:>5}/{group_count:<6} {score(group_killed, group_count)}  {seconds_per_mutant(members)}")
        print("\n".join(rows))
        total_killed += group_killed
        total += group_count
    print(f"{'total':<26} {total_killed:>5}/{total:<6} {score(total_killed, total)}")
    print(f"\nsurvivors ({len(survivors)}):")
    print("\n".join(survivors) if survivors else "  none")
    if show_killers:
        print("\nkilled, by the first test that failed:")
        print("\n".join(sorted(killers)))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Mutation testing (cosmic-ray) of the runtime and the rig's verdict code against their fastest tests. "
                    "Modules are grouped (" + ", ".join(GROUPS) + "); a sample is drawn per group.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="modules by group:\n" + "\n".join(
            f"  {group}: " + ", ".join(name for name, (g, _p, _t) in MODULES.items() if g == group) for group in GROUPS),
    )
    parser.add_argument("--module", action="append", choices=sorted(MODULES), metavar="MODULE",
                        help="run only this module (repeatable; see the list below); default: every module")
    parser.add_argument("--group", action="append", choices=GROUPS, help="run only this group's modules (repeatable)")
    parser.add_argument("--quick", nargs="?", type=int, const=30, default=None, metavar="N",
                        help="test a seeded random sample of N mutants PER GROUP (default N: 30), spread over the "
                             "group's modules (those chosen, with --module): each module gets one while N lasts, "
                             "the rest goes in proportion to their mutant counts; default: every mutant")
    parser.add_argument("--seed", type=int, default=1, help="seed of the --quick sample (default: 1)")
    parser.add_argument("--survivors", action="store_true",
                        help="re-test only the mutants the last run of a module left alive, keeping its other results")
    parser.add_argument("--report", action="store_true", help="print the last run's scores and survivors; run nothing")
    parser.add_argument("--killers", action="store_true", help="also list each killed mutant with the test that killed it")
    args = parser.parse_args()
    names = [name for name, (group, _path, _tests) in MODULES.items()
             if (not args.module or name in args.module) and (not args.group or group in args.group)]
    STATE.mkdir(exist_ok=True)
    if not args.report:
        os.environ["PYTHONPATH"] = str(TREE)  # the copy's acp_green, whatever the virtualenv has installed
        # Under nohup SIGHUP is ignored, and every agent a test starts would inherit that: the
        # probe's SIGHUP checks would then fail without any mutant. The tests expect the default.
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        copy_tree()
        for name, (db_path, files, _runs) in select(names, args).items():
            run(name, db_path, files)
    return report(names, args.killers)


if __name__ == "__main__":
    sys.exit(main())
