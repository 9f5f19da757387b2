"""The `acp-green` command line.

Its module top level imports only click and light standard modules (no logging, socket, gevent
or the rest of the package): `serve` patches (unless --no-monkey-patch) in the command body, after
click has parsed the command line and before anything it patches is imported.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any

import click

from .version import __version__

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def load_agent(spec: str) -> Any:
    """The agent `--agent SPEC` names, or a one-line error (exit 2) saying what is wrong with it."""
    from .agentspec import AgentSpecError, load_agent as load

    try:
        return load(spec)
    except AgentSpecError as exc:
        raise OneLineUsageError(f"--agent: {exc}") from None


class OneLineUsageError(click.ClickException):
    """A bad option value, said in one line ("Error: ...") and exit code 2, without click's usage block."""

    exit_code = 2


def tty_hint(command: str = "acp-green") -> str:
    """What `serve` says when started at a prompt; `command` is how this acp-green was invoked,
    so the commands it names run as printed even when acp-green is not on PATH (.venv/bin/...)."""
    return (f"acp-green serve speaks ACP (JSON-RPC) on stdin/stdout: an editor launches it "
            f"(`{command} editor-config zed` or `jetbrains` prints the settings); to talk to an agent "
            f"in a terminal, run `{command} chat`. Ctrl-D ends it.")


class Number(click.FloatRange):
    """A FloatRange that also refuses NaN (it passes every comparison, and a gevent timer of NaN
    seconds stops the hub) and, unless `infinite`, inf."""

    def __init__(self, min: float = 0, min_open: bool = False, infinite: bool = False) -> None:  # noqa: A002 - click's name
        super().__init__(min=min, min_open=min_open)
        self.infinite = infinite

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        seconds = super().convert(value, param, ctx)
        if math.isnan(seconds) or (math.isinf(seconds) and not self.infinite):
            self.fail(f"{value!r} is not a {'' if self.infinite else 'finite '}number", param, ctx)
        return seconds


def parse_provide_mcp(values: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """NAME=COMMAND pairs; COMMAND is split as a shell would split it (no shell runs it)."""
    import shlex

    provided: list[tuple[str, tuple[str, ...]]] = []
    for value in values:
        name, sep, command = value.partition("=")
        name = name.strip()
        if not sep or not name:
            raise click.BadParameter(f"expected NAME=COMMAND, got {value!r}", param_hint="--provide-mcp")
        try:
            argv = tuple(shlex.split(command))
        except ValueError as exc:
            raise click.BadParameter(f"cannot split the command of {name!r}: {exc}", param_hint="--provide-mcp") from None
        if not argv:
            raise click.BadParameter(f"{name!r} has an empty command", param_hint="--provide-mcp")
        if any(name == seen for seen, _ in provided):
            raise click.BadParameter(f"{name!r} is given twice", param_hint="--provide-mcp")
        provided.append((name, argv))
    return tuple(provided)


def _check_store_url(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A PostgreSQL URL (postgresql:// or postgres://), refused at once otherwise."""
    if value is None or value == "":
        return None
    scheme = value.partition("://")[0].lower()
    if scheme not in ("postgresql", "postgres"):
        raise click.BadParameter(f"expected a postgresql:// URL, got one starting {scheme[:20]!r}://" if "://" in value
                                 else "expected a postgresql://USER:PASSWORD@HOST/DB URL", param_hint="--store")
    return value


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="acp-green")
def cli() -> None:
    """acp_green: a gevent runtime for Agent Client Protocol agents over stdio."""


@cli.command()
@click.option("--agent", "agent_spec", metavar="MODULE:ATTR", default=None,
              help="Serve your own agent: MODULE:ATTR (MODULE importable, or in the current directory) or "
                   "path/to/file.py:ATTR; ATTR is an acp_green.Agent subclass, a factory taking no arguments, "
                   "or an instance. Default: the built-in demo agent.")
@click.option("--max-background", type=click.IntRange(min=1), default=32, show_default=True,
              help="Most prompt, MCP and extension requests running at once; one more is refused with -32000 connection_busy.")
@click.option("--shutdown-grace", type=Number(min=0), default=5.0, show_default=True, metavar="SECONDS",
              help="On EOF or SIGTERM, how long cancelled work may take to finish before it is aborted (a prompt "
                   "blocked in a sleep or a read is interrupted sooner, at --cancel-grace).")
@click.option("--cancel-grace", type=Number(infinite=True), default=0.5, show_default=True, metavar="SECONDS",
              help="How long a cancelled prompt may run on to end by itself; then its blocking call (sleep, socket "
                   "read, subprocess wait) is interrupted with acp_green.TurnInterrupted and the prompt answers "
                   "'cancelled'. 'inf': never interrupt.")
@click.option("--idle-timeout", type=Number(min=0, min_open=True), default=1800.0, show_default=True, metavar="SECONDS",
              help="Evict sessions idle longer than this from memory (never one with a running prompt).")
@click.option("--max-line-bytes", type=click.IntRange(min=1024), default=64 << 20, show_default=True, metavar="N",
              help="Longest input line; a longer one is skipped with -32600 line_too_long.")
@click.option("--max-mcp-servers", type=click.IntRange(min=0), default=64, show_default=True, metavar="N",
              help="Most MCP servers one session may declare (any transport); more is refused with -32602 too_many_mcp_servers.")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Where sessions and the usage ledger are kept (default $XDG_STATE_HOME/acp-green or ~/.local/state/acp-green).")
@click.option("--ephemeral", is_flag=True, help="Keep everything in memory; write nothing to disk.")
@click.option("--store", "store_url", default=None, metavar="URL", envvar="ACP_GREEN_STORE", callback=_check_store_url,
              help="Keep sessions and usage on a PostgreSQL server instead of --state-dir (postgresql://USER:PASSWORD@HOST/DB, "
                   "or $ACP_GREEN_STORE), shared by any number of agents on any number of hosts.")
@click.option("--stable-only", is_flag=True,
              help="Speak ACP's stable schema only, for clients that want no unstable surface: session/fork, "
                   "session/archive, session/unarchive, session/set_title, session/status and MCP-over-ACP (mcp/connect, "
                   "mcp/message, mcp/disconnect) answer -32601 and are not advertised, and a client's 'acp' MCP server is never "
                   "contacted; session/list then reports no "
                   "archive state and lists archived sessions too.")
@click.option("--max-protocol-version", type=click.IntRange(1, 2), default=2, show_default=True, metavar="{1,2}",
              help="The highest ACP version initialize negotiates: 2 is the v2 draft (docs/V2.md); 1 pins ACP v1 "
                   "for every client.")
@click.option("--provide-mcp", "provide_mcp", multiple=True, metavar="NAME=COMMAND",
              help="Provide a stdio MCP server over ACP (mcp/connect); repeatable; COMMAND is split like a shell would.")
@click.option("--monkey-patch/--no-monkey-patch", default=True, show_default=True,
              help="gevent monkey-patching, before the agent and the rest of acp_green are imported: the agent's "
                   "blocking calls (time.sleep, sockets, requests, httpx, LLM SDKs, subprocess) then yield instead of "
                   "freezing every session. --no-monkey-patch: only for agents written for gevent throughout.")
@click.option("--block-warning", type=Number(min=0), default=0.5, show_default=True, metavar="SECONDS",
              help="Warn on stderr, naming the function and its stack, when code holds the event loop this long "
                   "(every session waits meanwhile); 0 turns the check off.")
@click.option("--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False), default="WARNING", show_default=True,
              help="Log threshold; logs go to stderr, never stdout.")
@click.option("--flush-stall-timeout", type=Number(min=0), default=5.0, show_default=True, metavar="SECONDS",
              help="At exit, keep writing the last answers while the client reads them; give up once it has read "
                   "nothing for this long (30 s at most in all; at once if it closed its end).")
@click.option("--trace", "trace", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write every line read and written to FILE (replaced if it exists) as it passes: the trace "
                   "`acp-green record` writes, without a proxy process (docs/TRACES.md).")
@click.option("--listen", "listen", metavar="HOST:PORT", default=None,
              help="Serve many clients over the network instead of one on stdin/stdout: ACP over WebSocket and "
                   "Streamable HTTP at http://HOST:PORT/acp (port 0: any free port; the first line on stderr says "
                   "which). Each connection gets every guarantee a stdio connection has; sessions outlive "
                   "connections and one connection holds a session at a time (docs/REMOTE.md).")
@click.option("--token", "token", metavar="TOKEN", default=None, envvar="ACP_GREEN_TOKEN", show_envvar=True,
              help="With --listen: every request and WebSocket upgrade must carry 'Authorization: Bearer TOKEN' "
                   "(else 401, before any message is read). Prefer the environment variable: a command line is "
                   "visible to other users.")
@click.option("--tls-cert", "tls_cert", type=click.Path(exists=True, dir_okay=False), default=None, metavar="FILE",
              help="With --listen: serve HTTPS and wss:// with this certificate chain (PEM); --tls-key names its key "
                   "unless the file holds it.")
@click.option("--tls-key", "tls_key", type=click.Path(exists=True, dir_okay=False), default=None, metavar="FILE",
              help="With --tls-cert: the certificate's private key (PEM).")
@click.option("--allow-origin", "allow_origin", multiple=True, metavar="ORIGIN",
              help="With --listen: a web origin (scheme://host[:port]) whose pages may connect (repeatable). "
                   "Requests from any other browser page are refused 403; clients outside a browser send no origin.")
@click.option("--max-connections", type=click.IntRange(min=1), default=1024, show_default=True, metavar="N",
              help="With --listen: ACP connections served at once, WebSocket and Streamable HTTP together; another "
                   "initialize or upgrade is refused 503. Sockets are bounded at four per connection (more clients "
                   "wait in the listen backlog).")
@click.option("--connection-idle-timeout", type=Number(min=0, min_open=True), default=600.0, show_default=True,
              metavar="SECONDS",
              help="With --listen: end a Streamable HTTP connection after this long with no request and no event "
                   "stream open (its sessions stay stored). A WebSocket connection ends when its socket closes.")
def serve(agent_spec: str | None, max_background: int, shutdown_grace: float, cancel_grace: float, idle_timeout: float,
          max_line_bytes: int, state_dir: str | None, ephemeral: bool, provide_mcp: tuple[str, ...], monkey_patch: bool,
          block_warning: float, log_level: str, max_mcp_servers: int, flush_stall_timeout: float, stable_only: bool,
          trace: str | None, max_protocol_version: int = 2, listen: str | None = None, token: str | None = None,
          tls_cert: str | None = None, tls_key: str | None = None, max_connections: int = 1024,
          connection_idle_timeout: float = 600.0, allow_origin: tuple[str, ...] = (), store_url: str | None = None) -> None:
    """Run an ACP agent on stdin/stdout (the main job: point your editor at this), or with
    --listen for many clients over WebSocket and Streamable HTTP.

    \b
    Signals: SIGTERM, SIGINT, SIGHUP and every other catchable signal that would kill
    the process (SIGUSR1, SIGALRM, ...) shut down cleanly (running prompts answer
    "cancelled", usage is recorded, MCP servers are stopped, exit 0). SIGQUIT writes the
    stack of every thread and greenlet to stderr and keeps running.
    Stderr never stalls the agent: what an unread stderr cannot take is dropped and counted.
    """
    if store_url is not None and (ephemeral or state_dir is not None):
        raise click.UsageError("--store (or $ACP_GREEN_STORE) keeps sessions on a server: it cannot be used with "
                               f"{'--ephemeral' if ephemeral else '--state-dir'}")
    remote = None
    if listen is None:
        for name, value in (("--token", token), ("--tls-cert", tls_cert), ("--tls-key", tls_key),
                            ("--allow-origin", allow_origin[0] if allow_origin else None)):
            if value is not None and not (name == "--token" and os.environ.get("ACP_GREEN_TOKEN") == value):
                raise click.UsageError(f"{name} is for --listen: a stdio agent talks only to the editor that started it")
    else:
        if trace is not None:
            raise click.UsageError("--trace records the one connection of a stdio agent; it cannot be used with --listen")
        if tls_key is not None and tls_cert is None:
            raise click.UsageError("--tls-key needs --tls-cert")
        remote = listen_options(listen, token, tls_cert, tls_key, max_connections, connection_idle_timeout, allow_origin)
    if monkey_patch:
        monkey_patch_now()
    from .process import logsetup
    from .server import ServeOptions, serve_listening, serve_stdio
    from .rpc.transport import OutputLimits

    logsetup.configure(log_level)
    provided = parse_provide_mcp(provide_mcp)
    if agent_spec:
        sys.path.insert(0, os.getcwd())
        agent = load_agent(agent_spec)
    else:
        from .demo import DemoAgent

        agent = DemoAgent()
    taken = {server.name for server in agent.provided_mcp_servers()}
    for name, _argv in provided:
        if name in taken:
            raise click.BadParameter(f"{name!r} is already the name of an MCP server the agent provides", param_hint="--provide-mcp")
    options = ServeOptions(
        max_background=max_background,
        shutdown_grace=shutdown_grace,
        cancel_grace=cancel_grace,
        idle_timeout=idle_timeout,
        max_line_bytes=max_line_bytes,
        max_mcp_servers=max_mcp_servers,
        provide_mcp=provided,
        state_dir=state_dir,
        ephemeral=ephemeral,
        store_url=store_url,
        stable_only=stable_only,
        max_protocol_version=max_protocol_version,
        output=OutputLimits(flush_stall_timeout=flush_stall_timeout),
        block_warning=block_warning,
        trace=trace,
    )
    if remote is not None:
        sys.exit(serve_listening(agent, remote, options, log_level=log_level, monkey_patch=monkey_patch))
    if os.isatty(0):  # someone typed `acp-green serve` at a prompt: say why nothing happens
        invoked = sys.argv[0] if os.sep in sys.argv[0] and os.path.basename(sys.argv[0]) == "acp-green" else "acp-green"
        click.echo(tty_hint(invoked), err=True)
    # Usage errors above go straight to stderr; from here on nothing may block on fd 2.
    sys.exit(serve_stdio(agent, options, log_level=log_level, monkey_patch=monkey_patch))


def listen_options(listen: str, token: str | None, tls_cert: str | None, tls_key: str | None, max_connections: int,
                   idle_timeout: float, allow_origin: tuple[str, ...] = ()) -> Any:
    """`--listen` and its companions as a `remote.ListenOptions`; a usage error naming a bad one.

    Imports only what parses them: nothing gevent patches is imported before patching."""
    from .remote.auth import bearer_token
    from .remote.options import ListenOptions, parse_address

    try:
        host, port = parse_address(listen)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--listen") from None
    try:
        authorize = bearer_token(token) if token is not None else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--token") from None
    for origin in allow_origin:
        if "://" not in origin or origin.endswith("/") or origin != origin.strip():
            raise click.BadParameter(f"{origin!r} is not an origin: scheme://host[:port], no path (for example "
                                     "https://editor.example.com)", param_hint="--allow-origin")
    return ListenOptions(host=host, port=port, authorize=authorize, max_connections=max_connections,
                         max_sockets=4 * max_connections, idle_timeout=idle_timeout,
                         allowed_origins=frozenset(allow_origin), certfile=tls_cert, keyfile=tls_key)


def monkey_patch_now() -> None:
    """gevent's `patch_all()`, for `serve` only (unless --no-monkey-patch): the command line has
    been parsed and nothing it patches has been imported yet (click's own `threading` import is
    inert here: one thread, no lock of ours made yet)."""
    from .process.patching import patch_process

    patch_process()


@cli.command("editor-config", context_settings={"ignore_unknown_options": True})
@click.argument("editor", type=click.Choice(["zed", "jetbrains"]))
@click.option("--name", default="acp-green", show_default=True, help="The agent's name in the editor's agent list.")
@click.option("--record", "record_dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Run the agent behind `acp-green record`: each launch writes a new trace file "
                   "(acp-trace-<UTC time>-<pid>.jsonl) in DIR (made absolute; created when missing).")
@click.argument("serve_args", nargs=-1, type=click.UNPROCESSED, metavar="[SERVE OPTIONS]...")
def editor_config(editor: str, name: str, record_dir: str | None, serve_args: tuple[str, ...]) -> None:
    """Print the JSON that makes EDITOR (zed or jetbrains) launch this acp-green: acp-green editor-config zed [--record DIR] [--agent SPEC] [SERVE OPTIONS]

    \b
    The command is this installation's absolute executable; the serve options are checked as
    `serve` would check them, and --agent, --state-dir and --trace are made absolute (the editor
    starts the agent from a directory of its own). An --agent is loaded once here, so a wrong one
    fails now. Where to paste it goes to stderr; stdout is the JSON alone.
    """
    import json

    from .editorconfig import WHERE, absolute_serve_args, editor_settings

    with serve.make_context("serve", list(serve_args)) as ctx:  # refuses what serve would refuse
        agent_spec = ctx.params["agent_spec"]
    if agent_spec:
        from .agentspec import absolute_spec

        sys.path.insert(0, os.getcwd())
        load_agent(absolute_spec(agent_spec, os.getcwd()))
    args = absolute_serve_args(list(serve_args), os.getcwd())
    recording = os.path.abspath(os.path.expanduser(record_dir)) if record_dir is not None else None
    click.echo(json.dumps(editor_settings(editor, name, args, recording), indent=2))
    click.echo(WHERE[editor], err=True)


@cli.command("new")
@click.argument("name")
@click.option("--llm", is_flag=True, help="An agent on an OpenAI-compatible endpoint instead of the hello agent.")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=None, metavar="PATH",
              help="Where to make the project (default: ./NAME); it must be new or empty.")
def new(name: str, llm: bool, directory: str | None) -> None:
    """Make a ready project for an agent on acp_green: acp-green new NAME [--llm] [--dir PATH]

    \b
    NAME is the distribution, its command and (with - as _) its package. The project holds
    pyproject.toml, the agent, its tests on acp_green's pytest plugin, ci.sh and a README with
    the editor settings (docs/NEW_PROJECT.md).
    """
    from pathlib import Path

    from .editorconfig import EDITORS, WHERE, command_settings
    from .tools.newproject.project import ProjectRefused, make_project, next_steps

    def settings(command: str, env: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
        return [(WHERE[editor], command_settings(editor, name, command, [], env)) for editor in EDITORS]

    target = Path(directory if directory is not None else name)
    try:
        project = make_project(name, target, llm=llm, editor_settings=settings)
    except ProjectRefused as exc:
        raise OneLineUsageError(str(exc)) from None
    click.echo(next_steps(project, target, llm=llm))


# -- inspecting the state directory -----------------------------------------------------------
def _state_dir_option(fn: Any) -> Any:
    fn = click.option(
        "--store", "store_url", default=None, metavar="URL", envvar="ACP_GREEN_STORE", callback=_check_store_url,
        help="The PostgreSQL server `serve --store` used (or $ACP_GREEN_STORE), instead of a state directory.",
    )(fn)
    return click.option(
        "--state-dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
        help="The state directory `serve` used (default $XDG_STATE_HOME/acp-green or ~/.local/state/acp-green).",
    )(fn)


def _resolve_state_dir(state_dir: str | None) -> str:
    from .store.statedir import default_state_dir

    return os.path.abspath(os.path.expanduser(state_dir or default_state_dir()))


def _open_db(state_dir: str | None, store_url: str | None, write: bool = False) -> Any:
    """The store's database for an inspection command (read-only unless `write`): a PostgreSQL
    server, or a state directory's SQLite file; a clean error when it cannot be read."""
    import contextlib
    import sqlite3

    from .store import statedb
    from .store.report import StateUnreadable, open_database, printable

    if store_url is not None and state_dir is not None:
        raise click.UsageError("--store and --state-dir name two different stores: give one")

    @contextlib.contextmanager
    def opened() -> Any:
        resolved = _resolve_state_dir(state_dir)
        if store_url is None and state_dir is not None and not os.path.isdir(resolved):
            # A mistyped --state-dir is an error; the default one not made yet only means nothing was stored.
            raise click.ClickException(f"no directory {printable(resolved)} (check --state-dir)")
        try:
            with open_database(resolved, store_url, write=write) as db:
                if db is None and not write:
                    # Said on stderr: stdout stays the (empty) answer, valid JSON with --json.
                    where = resolved
                    if store_url is not None:
                        from .store.postgres import redacted

                        where = redacted(store_url)
                    click.echo(f"nothing is stored in {printable(where)} yet (no state database there)", err=True)
                yield db
        except StateUnreadable as exc:
            raise click.ClickException(str(exc)) from None
        except sqlite3.DatabaseError as exc:
            # Damage past the header is only met by the query that reaches it: one line, exit 1.
            raise click.ClickException(f"cannot read {printable(statedb.db_path(resolved))}: {exc}") from None
        except Exception as exc:
            from .store.pg_connection import is_psycopg_error

            if not is_psycopg_error(exc):
                raise
            raise click.ClickException(f"the store server failed: {printable(str(exc).strip())}") from None

    return opened()


def _echo_json(value: Any) -> None:
    from .store.report import json_text

    click.echo(json_text(value))


@cli.group()
def sessions() -> None:
    """List, show, delete and export stored sessions."""


@sessions.command("list")
@_state_dir_option
@click.option("--cwd", default=None, help="Only sessions whose working directory is this.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def sessions_list(state_dir: str | None, store_url: str | None, cwd: str | None, as_json: bool) -> None:
    """Stored sessions, most recently active first; archived ones and forks are marked."""
    from .store.report import printable, session_dict, session_marks

    with _open_db(state_dir, store_url) as db:
        records = db.list_sessions(cwd) if db is not None else []
        counts = {r.session_id: db.turn_count(r.session_id) for r in records} if db is not None else {}
    if as_json:
        _echo_json([{**session_dict(r), "turns": counts[r.session_id]} for r in records])
        return
    for record in records:
        line = f"{record.session_id}  {counts[record.session_id]:>4} turns  {record.cwd}  {record.title or ''}  {session_marks(record)}"
        click.echo(printable(line.rstrip()))


@sessions.command("show")
@_state_dir_option
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print the session, its turns and its whole history as JSON.")
@click.option("--full", is_flag=True,
              help="Print every message and every line in full (default: long messages and long turns are cut, saying how much).")
def sessions_show(state_dir: str | None, store_url: str | None, session_id: str, as_json: bool, full: bool) -> None:
    """One session's metadata and its conversation, turn by turn with each turn's outcome."""
    from .store.report import export_sessions, printable, render_turns, session_dict

    with _open_db(state_dir, store_url) as db:
        record = db.load_session(session_id) if db is not None else None
        if record is None:
            raise click.ClickException(f"no stored session {session_id}")
        if as_json:
            _echo_json(export_sessions(db, [session_id])[0])
            return
        session = session_dict(record)
        for key in ("sessionId", "cwd", "title", "modeId", "config", "additionalDirectories", "archived", "forkedFrom"):
            if key != "forkedFrom" or session[key] is not None:
                click.echo(printable(f"{key}: {session[key]}"))
        click.echo("")
        for fragment in render_turns(db, session_id, full=full):
            click.echo(printable(fragment, newlines=True), nl=False)  # the lines of a message stay lines


@sessions.command("delete")
@_state_dir_option
@click.argument("session_ids", nargs=-1, required=True)
def sessions_delete(state_dir: str | None, store_url: str | None, session_ids: tuple[str, ...]) -> None:
    """Delete sessions and their history (their usage records stay in the ledger). A session
    open in a running agent is left alone, naming the agent: close it there first."""
    from .store.report import delete_sessions, printable

    with _open_db(state_dir, store_url, write=True) as db:
        if db is None:
            raise click.ClickException("nothing is stored there")
        found, held = delete_sessions(db, list(session_ids))
    for session_id, holder in held.items():
        click.echo(printable(f"not deleted: {session_id} is open in {holder}; close it there first"), err=True)
    click.echo(f"deleted {len(found)} of {len(session_ids)} sessions")
    if held:
        sys.exit(1)


@sessions.command("export")
@_state_dir_option
@click.argument("session_ids", nargs=-1)
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              help="Write to this file (default stdout): created 0600, never through a symbolic link.")
def sessions_export(state_dir: str | None, store_url: str | None, session_ids: tuple[str, ...], output: str) -> None:
    """Sessions (all, or the ones named) with their whole history, as JSON."""
    from .redact import write_private
    from .store.report import export_sessions, json_text

    with _open_db(state_dir, store_url) as db:
        exported = export_sessions(db, list(session_ids))
    text = json_text({"sessions": exported}) + "\n"
    try:
        if output == "-":
            sys.stdout.write(text)
        else:
            write_private(output, text)
    except OSError as exc:
        raise click.ClickException(f"cannot write {output}: {exc.strerror or exc}") from None


@cli.command()
@_state_dir_option
@click.option("--session", "session_id", default=None, help="Only this session's prompts.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--records", is_flag=True, help="With --json: include every usage record.")
def usage(state_dir: str | None, store_url: str | None, session_id: str | None, as_json: bool, records: bool) -> None:
    """The usage ledger: totals and per session (one record per admitted prompt)."""
    from .store.report import usage_report, usage_table

    with _open_db(state_dir, store_url) as db:
        report = usage_report(db, session_id, with_records=records)
    if as_json:
        _echo_json(report)
        return
    for line in usage_table(report):
        click.echo(line)


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (for machines).")
@click.option("--long-prompt", default="/wait", show_default=True, metavar="TEXT",
              help="A prompt that runs for many seconds, until cancelled. The default is a command of acp-green's demo "
                   "agent; any other agent needs its own, e.g. --long-prompt 'Write a 3000-word essay on rivers.' "
                   "Without one, the cancel and busy-session rows are skipped (needs --long-prompt).")
@click.option("--stream-prompt", default="/stream 20000 256", show_default=True, metavar="TEXT",
              help="A prompt that streams many updates (the default is the demo's; when it ends at once the long prompt "
                   "is used). Chunk order is checked only in the demo's grammar (chunks numbered 0:, 1:, ...).")
@click.option("--timeout", type=Number(min=0.1), default=10.0, show_default=True, metavar="SECONDS",
              help="How long any single answer may take before its check fails.")
@click.option("--sessions", type=click.IntRange(min=1), default=16, show_default=True,
              help="Sessions opened at once by the many-sessions check.")
@click.option("--check", "only", multiple=True, metavar="NAME",
              help="Run only the checks whose names contain NAME (repeatable).")
@click.option("--tool-prompt", default=None, metavar="TEXT",
              help="A prompt that makes the agent use a tool on the file the probe offers; {file} is replaced by its path "
                   "(notes.txt in a per-run temporary directory, each session's cwd, named in the report). Default: "
                   "'/read {file}', the demo agent's command; e.g. --tool-prompt 'Read {file} and quote its first line.'")
@click.option("--authenticate", metavar="METHOD_ID", default=None,
              help="Call `authenticate` with this authMethods id after every initialize (default: never).")
@click.option("--keep-env", is_flag=True,
              help="Run the agent with this environment as it is. Default: a fresh temporary XDG_STATE_HOME, "
                   "removed afterwards, so the agent's state stays out of yours (HOME is left alone).")
@click.option("--settle-window", type=Number(min=0), default=5.0, show_default=True, metavar="SECONDS",
              help="How long, after each agent run, the processes the agent started may take to exit before they "
                   "count as left running (a wrapper's children often exit a moment after it); waited only while "
                   "one is still alive, so a long window slows only a probe of an agent that leaves some.")
@click.option("--protocol", type=click.Choice(["1", "2"]), default="1", show_default=True,
              help="The ACP version every run asks for: 2 grades the agent's v2 (draft) sessions and turns; an agent "
                   "that answers 1 gets one row saying so.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def probe(as_json: bool, long_prompt: str, stream_prompt: str, timeout: float, sessions: int,
          only: tuple[str, ...], tool_prompt: str | None, authenticate: str | None, keep_env: bool,
          settle_window: float, protocol: str, command: tuple[str, ...]) -> None:
    """Check any ACP agent from outside: acp-green probe -- COMMAND [ARGS...], or a remote one:
    acp-green probe URL [--header 'NAME: VALUE'] [--token T] (ws://, wss://, http://, https://).

    \b
    Each check runs the agent afresh. A broken MUST is FAIL (exit 1), quoting the wire that
    proves it; advisory rows (SHOULD-level: WARN) are shown apart and never change the exit
    code. The agent runs with a fresh temporary XDG_STATE_HOME unless --keep-env.

    \b
    Examples:
      acp-green probe -- acp-green serve
      acp-green probe --long-prompt 'Count slowly from 1 to 500, one number per line.' \\
          --tool-prompt 'Read {file} and tell me what it says.' -- python my_agent.py
      acp-green probe --authenticate api-key --json -- node agent.js
      acp-green probe --protocol 2 -- acp-green serve
    """
    from .tools.rig.probe import ProbeConfig, main

    cfg = ProbeConfig(list(command), long_prompt=long_prompt, stream_prompt=stream_prompt,
                      timeout=timeout, sessions=sessions, authenticate=authenticate, keep_env=keep_env,
                      settle_window=settle_window, ask=int(protocol))
    if tool_prompt is not None:
        cfg.tool_prompt = tool_prompt
    sys.exit(main(cfg, as_json, only))


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--yes", "-y", is_flag=True,
              help="Approve, without asking, every permission request, every command the agent asks to run, every "
                   "file it writes and every file outside the current directory it reads (default: ask when stdin is a "
                   "terminal, reject when it is not). Forms are still asked in a terminal.")
@click.option("--deny", is_flag=True, help="Reject, without asking, every permission request, every command the agent asks "
                                            "to run, every write and every read outside the current directory.")
@click.option("--resume", "resume", metavar="SESSION_ID", default=None,
              help="Continue a stored session (its history shown compactly) instead of starting a new one; "
                   "`/sessions` in chat or `acp-green sessions list` shows the ids.")
@click.option("--ephemeral", is_flag=True,
              help="Demo agent only: keep this chat's sessions in memory; write nothing to disk.")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Demo agent only: where its sessions are kept (default: where `serve` keeps them, "
                   "$XDG_STATE_HOME/acp-green or ~/.local/state/acp-green).")
@click.option("--authenticate", "authenticate", metavar="METHOD_ID", default=None,
              help="Log in with this of the agent's authMethods (its id) before the session starts, for an agent "
                   "that refuses sessions until then (-32000 authentication required).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def chat(yes: bool, deny: bool, resume: str | None, ephemeral: bool, state_dir: str | None, command: tuple[str, ...],
         authenticate: str | None = None) -> None:
    """Talk to an agent in the terminal: acp-green chat [-- COMMAND [ARGS...] | URL] (default: the demo agent).

    \b
    Each line typed is a prompt. Ctrl-C cancels the running turn; a second
    Ctrl-C, or one at the prompt, quits at once (exit 130). Ctrl-D at the
    prompt quits; during a turn it cancels the turn, then quits. When the
    agent is slow to answer, a status line says what chat waits for.
    /sessions lists the agent's stored sessions and /load ID continues one
    (so does --resume ID); other lines starting with / go to the agent.
    The demo agent keeps its sessions where `serve` does, so
    `acp-green sessions list` shows them (--ephemeral: none are kept); an
    agent given after -- keeps its own.
    Chat is a real client: the agent reads and writes real files (absolute paths
    only), runs commands on this machine and shows forms.
    The agent reads regular files inside the current directory (the session's
    cwd) freely; a read outside it (symlinks resolved) and every write are asked
    first, with the write's diff. Only regular files are served (FIFOs, devices,
    sockets and directories are refused) and a read takes at most 8 MiB.
    When the agent asks (a permission, with the tool call's title and diff; a
    command to run; a form; a file), the next line typed is the answer: the
    number of one of the options shown, or the key in brackets beside it.
    Only the options the agent offered are shown and accepted.
    When stdin is not a terminal nobody can be asked: permissions, commands and
    those file requests are rejected unless --yes approves them, and forms are
    declined. Control characters and escape sequences the agent sends are shown
    as \\xNN, never sent to the terminal.
    """
    from .tools.rig.chat import main

    if yes and deny:
        raise click.UsageError("--yes and --deny cannot be given together")
    if command and (ephemeral or state_dir is not None):
        raise click.UsageError("--ephemeral and --state-dir are for the demo agent; an agent given after -- keeps its own sessions")
    sys.exit(main(command, approve="yes" if yes else "deny" if deny else "ask", resume=resume, ephemeral=ephemeral,
                  state_dir=state_dir, authenticate=authenticate))


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--out", "out", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write the trace to FILE (replaced if it exists). Default: a new file "
                   "acp-trace-<UTC time>-<pid>.jsonl in --out-dir.")
@click.option("--out-dir", "out_dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Where the default trace file goes, one new file per launch (default: the current directory).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def record(out: str | None, out_dir: str | None, command: tuple[str, ...]) -> None:
    """Record what an editor and an agent say to each other: acp-green record [--out FILE] -- AGENT [ARGS...] | URL

    \b
    Put it in front of any stdio agent, in the editor's agent command. Every byte goes
    through unchanged both ways, end of input included; each line is written to the trace
    (JSON Lines, docs/TRACES.md) as it passes, with its direction and time, and so is every
    line the agent writes to stderr (which also goes on to this command's stderr).
    SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH and SIGCONT are
    forwarded to the agent; the exit status is the agent's (128+N when signal N ended it).
    A trace file that cannot be written is said once on stderr; the agent runs on unrecorded.
    """
    from .tools.trace.record import RecordOptions, main

    if out is not None and out_dir is not None:
        raise click.UsageError("--out and --out-dir cannot be given together")
    sys.exit(main(RecordOptions(command, out=out, out_dir=out_dir)))


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--duration", type=Number(min=0, min_open=True), default=120.0, show_default=True, metavar="SECONDS",
              help="How long the random mix runs. Growth is judged only if this is at least twice --warmup.")
@click.option("--warmup", type=Number(min=0), default=60.0, show_default=True, metavar="SECONDS",
              help="How long an agent's memory may climb before it levels (page cache, interned strings): growth is "
                   "judged on the second half of a run at least twice this long; a shorter run is inconclusive.")
@click.option("--agents", type=click.IntRange(min=1), default=4, show_default=True,
              help="Agents driven in parallel, each by its own seeded mix.")
@click.option("--seed", type=int, default=1, show_default=True,
              help="Seed of the random mix; the same seed gives the same sequence of actions.")
@click.option("--sessions", type=click.IntRange(min=1), default=3, show_default=True,
              help="Sessions opened on each agent.")
@click.option("--sample-interval", type=Number(min=0, min_open=True), default=1.0, show_default=True,
              metavar="SECONDS", help="How often each agent's RSS, open descriptors and greenlets are sampled.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="soak-results", show_default=True, metavar="DIR",
              help="Where summary.json, samples.json and memory.png are written.")
@click.option("--no-plot", is_flag=True, help="Do not draw memory.png (default: drawn when matplotlib is installed).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def soak(duration: float, warmup: float, agents: int, seed: int, sessions: int, sample_interval: float, out_dir: str,
         no_plot: bool, command: tuple[str, ...]) -> None:
    """Soak agents under a seeded random mix: acp-green soak [OPTIONS] [-- COMMAND [ARGS...]]

    \b
    Prompts, streams, cancels at random moments, busy prompts, mode changes, pauses in reading,
    EOF mid-turn and SIGTERM, with the invariants checked all along. Exit 1 on a broken
    invariant or a resource that keeps growing after the warm-up: the least-squares slope of
    each window's floor over the second half of the run, judged only when the run is at least
    twice --warmup long (a fresh agent's memory climbs, then levels: read over that climb, a
    slope says "leak" when there is none; the second half rather than all after the warm-up
    keeps a margin on a loaded machine, where warm-up takes longer). A shorter run, or one
    with too few samples, ends "INCONCLUSIVE" with the reason, exit 0. Default COMMAND:
    acp-green serve, each agent on a state directory of its own under DIR/state (emptied first).
    """
    from .tools.rig.soak import SoakConfig, fresh_state_root, main, serve_command

    given = list(command)
    cfg = SoakConfig(given or serve_command(), agents=agents, duration=duration, seed=seed, sessions=sessions,
                     sample_interval=sample_interval, out_dir=out_dir, plot=not no_plot, warmup=warmup,
                     state_root=None if given else fresh_state_root(out_dir))
    sys.exit(main(cfg))


@cli.command()
@click.option("--agent", "agents", multiple=True, metavar="NAME=COMMAND",
              help="An agent to measure (repeatable; COMMAND split like a shell would). Default: acp-green serve plus every peer whose runtime is present.")
@click.option("--only", multiple=True, metavar="NAME",
              help="Of the default agents, run only these (acp-green, python-sdk, ts-sdk, bare-loop; repeatable).")
@click.option("--workload", "-w", "workloads", multiple=True, type=click.Choice(["W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8"]),
              help="Run only these workloads (repeatable). Default: all.")
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True, help="Rounds; each round runs every workload on every agent.")
@click.option("--scale", type=Number(min=0, min_open=True), default=1.0, show_default=True,
              help="Multiply chunk counts, round trips and sessions (1 = the default sizes, docs/BENCHMARKS.md).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None, metavar="PATH", help="Write the full results as JSON.")
@click.option("--chart", "chart_path", type=click.Path(dir_okay=False), default=None, metavar="PATH", help="Write a PNG chart (needs matplotlib: pip install 'acp-green[plot]').")
@click.option("--install-peers", is_flag=True, help="Install the peers' SDKs into the cache directory first.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None, metavar="DIR", help="Where peers' SDKs are installed (default: .bench-cache in a source checkout, else ~/.cache/acp-green/bench).")
@click.option("--peers-dir", type=click.Path(file_okay=False, exists=True), default=None, metavar="DIR", help="Where the peer agents' sources are (default: acp_green/tools/bench/peer_agents, installed with the package).")
@click.option("--no-ceiling", is_flag=True, help="Skip measuring the bench client's own read rate.")
@click.option("--read-pause", type=Number(min=0), default=0.0, metavar="SECONDS",
              help="Calibration only: sleep before each read, like a lazy client (inflates every latency).")
@click.option("--protocol", type=click.IntRange(1, 2), default=1, show_default=True,
              help="The ACP version the bench client asks for: 2 is the v2 draft (a prompt ends at its idle state_update); an agent that serves only v1 is measured under v1.")
def bench(agents: tuple[str, ...], only: tuple[str, ...], workloads: tuple[str, ...], repeat: int, scale: float,
          json_path: str | None, chart_path: str | None, install_peers: bool, cache_dir: str | None, peers_dir: str | None,
          no_ceiling: bool, read_pause: float, protocol: int) -> None:
    """Benchmark ACP agents side by side (workloads W1-W8): medians and spread as a table, JSON and a chart."""
    from pathlib import Path

    from .tools.bench.app import BenchSettings, run
    from .tools.bench.peers import default_cache_dir, default_peers_dir
    from .tools.bench.catalog import WORKLOADS

    settings = BenchSettings(
        agents=agents, only=only, workloads=workloads or tuple(WORKLOADS), repeat=repeat, scale=scale,
        json_path=Path(json_path) if json_path else None, chart_path=Path(chart_path) if chart_path else None,
        install=install_peers, cache_dir=Path(cache_dir) if cache_dir else default_cache_dir(),
        peers_dir=Path(peers_dir) if peers_dir else default_peers_dir(), ceiling=not no_ceiling, read_pause=read_pause,
        protocol=protocol,
    )
    sys.exit(run(settings))


@cli.group()
def trace() -> None:
    """Look at a trace of ACP traffic: check, show, draw or replay it (docs/TRACES.md)."""


@trace.command("html")
@click.argument("trace_file", metavar="FILE", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, metavar="PATH",
              help="Where to write the page (default: FILE with the suffix .html).")
def trace_html(trace_file: str, output: str | None) -> None:
    """One self-contained HTML page (no network) with a timeline per session; click a mark to see its message."""
    from pathlib import Path

    from .tools.trace.html import write_html

    target = Path(output) if output else Path(trace_file).with_suffix(".html")
    if target.resolve() == Path(trace_file).resolve():
        raise OneLineUsageError("-o: the page would overwrite the trace; name another file")
    try:
        timeline = write_html(trace_file, target)
    except OSError as exc:  # a trace or page named through a symbolic link, a directory not there...
        raise click.ClickException(f"{exc.filename or trace_file}: {exc.strerror or exc}") from None
    click.echo(f"wrote {target}: {len(timeline.lanes) - 1} sessions, {len(timeline.marks)} marks, "
               f"{len(timeline.events)} events", err=True)


def _read_trace(path: str) -> Any:
    from .tools.trace.read import read_trace

    try:
        return read_trace(path)
    except OSError as exc:
        raise click.ClickException(f"cannot read {path}: {exc.strerror or exc}") from None


@trace.command("check")
@click.argument("path", metavar="FILE")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--long-prompt", "long_prompts", multiple=True, metavar="TEXT",
              help="A prompt that ends only when cancelled (e.g. the demo's /wait): once cancelled it must answer "
                   "stopReason \"cancelled\" (repeatable).")
def trace_check(path: str, as_json: bool, long_prompts: tuple[str, ...]) -> None:
    """Check every message of a trace against the ACP schemas and the rig's invariants; exit 1 on a problem."""
    from .tools.trace.check import check_trace, json_report, text_report

    found = _read_trace(path)
    report = check_trace(found, long_prompts)
    if as_json:
        _echo_json(json_report(path, found, report))
    else:
        for line in text_report(path, found, report):
            click.echo(line)
    sys.exit(0 if report.ok else 1)


@trace.command("show")
@click.argument("path", metavar="FILE")
@click.option("--session", "session_id", default=None, metavar="ID", help="Only this session.")
@click.option("--grep", default=None, metavar="TEXT", help="Only the messages whose line contains TEXT (and their answers).")
def trace_show(path: str, session_id: str | None, grep: str | None) -> None:
    """A trace as a timeline per session: requests with their answers and latency, updates folded, errors and cancels marked."""
    from .tools.trace.show import render, timeline

    found = _read_trace(path)
    for line in render(found, timeline(found, session_id, grep), path):
        click.echo(line)


@trace.command("replay", context_settings={"ignore_unknown_options": True})
@click.argument("path", metavar="FILE")
@click.option("--timeout", type=Number(min=0.1), default=10.0, show_default=True, metavar="SECONDS",
              help="How long to wait for each answer or update the trace's client had seen before its next line.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def trace_replay(path: str, timeout: float, as_json: bool, command: tuple[str, ...]) -> None:
    """Replay the client side of a trace against an agent: acp-green trace replay FILE -- COMMAND [ARGS...]

    \b
    The agent's own requests are answered as the trace's client answered them; its session ids
    stand for the recorded ones. Exit 1 where the agent diverges from the trace (other methods,
    a missing or extra answer, another stopReason, an error for a result).
    """
    from .tools.trace.replay import replay, text_report

    if command[:1] == ("--",):  # FILE ends the options: click hands the separator on
        command = command[1:]
    if not command:
        raise click.UsageError("give the agent's command after --")
    found = _read_trace(path)
    try:
        report = replay(found, list(command), timeout)
    except OSError as exc:
        raise click.ClickException(f"cannot start {command[0]}: {exc.strerror or exc}") from None
    if as_json:
        _echo_json({"file": path, "command": list(command), "ok": report.ok, "sent": report.sent, "exit": report.exit_code,
                    "divergences": [{"line": d.line, "what": d.what} for d in report.divergences], "stderr": report.stderr_tail})
    else:
        for line in text_report(path, command, report):
            click.echo(line)
    sys.exit(0 if report.ok else 1)


@cli.command()
@click.option("--agent", "agent_spec", metavar="MODULE:ATTR", default=None,
              help="The agent the package serves (as for serve --agent): its auth_methods are checked, and a console "
                   "script that is acp-green's own command line gets `serve --agent MODULE:ATTR` as its arguments.")
@click.option("--package", "package", metavar="DIST", default=None,
              help="Read the metadata of this installed distribution (default: the [project] table of ./pyproject.toml).")
@click.option("--out", "out", type=click.Path(dir_okay=False), default="agent.json", show_default=True, metavar="FILE",
              help="Where to write the manifest; - for stdout.")
@click.option("--distribution", "kinds", multiple=True, type=click.Choice(["uvx", "npx", "binary"]),
              help="How the agent is installed (repeatable; default: uvx).")
@click.option("--id", "entry_id", default=None, help="The registry id (default: the package's name, lowercased, with hyphens).")
@click.option("--name", default=None, help="The display name (default: the package's name).")
@click.option("--version", "version", default=None, metavar="X.Y.Z", help="Default: the package's version.")
@click.option("--description", default=None, help="Default: the package's description (Summary).")
@click.option("--repository", default=None, metavar="URL", help="Default: the package's Repository (or Source, or Homepage) URL.")
@click.option("--license", "license_id", default=None, metavar="SPDX-ID", help="Default: the package's license.")
@click.option("--author", "authors", multiple=True, metavar="'NAME <EMAIL>'", help="Repeatable; default: the package's authors.")
@click.option("--args", "args", default=None, metavar="ARGS",
              help="The agent's arguments after its command, as one string (default: none, or `serve --agent ...`).")
@click.option("--npx-package", default=None, metavar="NAME@VERSION", help="The npm package, for --distribution npx.")
@click.option("--binary", "binaries", multiple=True, metavar="PLATFORM=URL",
              help="An archive per platform, for --distribution binary (repeatable).")
@click.option("--binary-cmd", default=None, metavar="CMD", help="What to run in the unpacked archive, for --distribution binary.")
@click.option("--check", "check_file", default=None, metavar="FILE",
              help="Check this manifest instead of writing one: its format, then the agent it starts (exit 1 on a failure).")
@click.option("--command", "command", default=None, metavar="COMMAND",
              help="With --check: start the agent with this command line instead of the manifest's.")
@click.option("--timeout", type=Number(min=0.1), default=10.0, show_default=True, metavar="SECONDS",
              help="With --check: how long the agent may take to answer initialize.")
@click.option("--keep-home", is_flag=True, help="With --check: keep HOME (default: a fresh empty one, as the registry's check has).")
@click.option("--json", "as_json", is_flag=True, help="With --check: print the report as JSON.")
def manifest(check_file: str | None, as_json: bool, command: str | None, timeout: float, keep_home: bool,
             **options: Any) -> None:
    """Write the ACP registry manifest (agent.json) of your package, or check one (docs/PUBLISHING.md).

    \b
    Examples:
      acp-green manifest --agent my_agent:MyAgent
      acp-green manifest --check agent.json
      acp-green manifest --check agent.json --command 'python -m my_agent'
    """
    from .tools.publish import command as publish

    publish.refuse_mixed(check_file is not None, options, command is not None or keep_home or as_json)
    if check_file is not None:
        sys.exit(publish.check(check_file, as_json, command, timeout, keep_home))

    def auth_methods(spec: str) -> list[dict[str, Any]]:
        return [method.to_wire() for method in load_agent(spec).auth_methods]

    sys.exit(publish.write(options, auth_methods))
