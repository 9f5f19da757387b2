"""The editor's side of a test, as a rig `ClientPolicy`: permission answers, files under one
directory, elicitation answers; terminals run on this machine (the rig's `TerminalHost`).

The client reads and writes real files, but only under `root` (the sessions' cwd): an agent's
read or write anywhere else is refused, so a test never touches the author's own files. A
scripted answer that raises or names no option is a mistake in the test: it is answered as
a client would (cancelled, or an error) and kept in `problems`, which fail the test.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND
from ..tools.rig.client import AcpClient, ClientPolicy

__all__ = ["DEFAULT_CAPABILITIES", "Editor", "ElicitationAnswers", "PermissionAnswer"]

#: An editor that can do everything: read and write files, run terminals, show forms.
DEFAULT_CAPABILITIES: dict[str, Any] = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True,
                                        "elicitation": {"form": {}}}

#: "allow" or "reject" (the first option of that kind), or a callable given the request's params
#: (`sessionId`, `toolCall`, `options`) that returns "allow", "reject", an optionId, or None (cancelled).
PermissionAnswer = str | Callable[[dict[str, Any]], str | None]
#: Results of `elicitation/create` in order (then "decline"), or a callable given the request's params.
ElicitationAnswers = Sequence[Mapping[str, Any]] | Callable[[dict[str, Any]], Mapping[str, Any]]

_KINDS = {"allow": ("allow_once", "allow_always"), "reject": ("reject_once", "reject_always")}


class Editor:
    """What the scripted editor answers; `written` and `problems` are read by the test and the checks."""

    def __init__(self, root: Path, *, permissions: PermissionAnswer = "allow", files: Mapping[str, str] | None = None,
                 capabilities: Mapping[str, Any] | None = None, elicitation: ElicitationAnswers | None = None) -> None:
        if isinstance(permissions, str) and permissions not in _KINDS:
            raise ValueError(f"permissions must be 'allow', 'reject' or a callable, not {permissions!r}")
        self.root = root.resolve()
        self.capabilities = dict(DEFAULT_CAPABILITIES if capabilities is None else capabilities)
        self.written: dict[str, str] = {}  # absolute path -> what the agent wrote there, last write wins
        self.problems: list[str] = []
        self._permissions = permissions
        self._elicitation = elicitation
        for relative, text in (files or {}).items():
            path = self.root / relative
            if not path.resolve().is_relative_to(self.root):
                raise ValueError(f"files: {relative!r} is not a path inside the test's directory")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")

    def policy(self) -> ClientPolicy:
        """The rig policy that answers as this editor does."""
        handlers: dict[str, Callable[[AcpClient, dict[str, Any]], None]] = {
            "fs/read_text_file": self._read, "fs/write_text_file": self._write}
        policy = ClientPolicy(capabilities=self.capabilities, handlers=handlers)
        if callable(self._permissions):
            handlers["session/request_permission"] = self._permission
        else:
            policy.permission = self._permissions
        if callable(self._elicitation):
            handlers["elicitation/create"] = self._elicit
        elif self._elicitation is not None:
            policy.elicitations = [dict(answer) for answer in self._elicitation]
        return policy

    # -- files -------------------------------------------------------------------------------
    def _inside(self, client: AcpClient, request: dict[str, Any], capability: str) -> Path | None:
        """The requested path when it is under root and the capability is advertised; else answered here."""
        params = request.get("params") or {}
        fs = self.capabilities.get("fs") or {}
        if fs.get(capability) is not True:
            client.respond_error(request["id"], {"code": METHOD_NOT_FOUND, "message": f"Method not found: {request['method']}"})
            return None
        path = Path(str(params.get("path", "")))
        if path.is_absolute() and path.resolve().is_relative_to(self.root):
            return path
        client.respond_error(request["id"], {"code": RESOURCE_NOT_FOUND, "message": f"Resource not found: {path} is outside the "
                                             f"test's directory {self.root}", "data": {"uri": str(path)}})
        return None

    def _read(self, client: AcpClient, request: dict[str, Any]) -> None:
        path = self._inside(client, request, "readTextFile")
        if path is None:
            return
        if not path.is_file():
            client.respond_error(request["id"], {"code": RESOURCE_NOT_FOUND, "message": f"Resource not found: {path}",
                                                 "data": {"uri": str(path)}})
            return
        params = request.get("params") or {}
        line, limit = params.get("line"), params.get("limit")
        if not all(value is None or type(value) is int and value >= 0 for value in (line, limit)):
            client.respond_error(request["id"], {"code": INVALID_PARAMS, "message": "Invalid params: line and limit are "
                                                 f"integers at least 0, not {line!r} and {limit!r}"})
            return
        try:
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        except (OSError, UnicodeError) as exc:  # answered, never raised: it would end the client's reading
            client.respond_error(request["id"], {"code": INTERNAL_ERROR, "message": "Internal error",
                                                 "data": {"details": f"cannot read {path}: {exc}"}})
            return
        start = max(line or 1, 1) - 1  # ACP: `line` is 1-based
        chosen = lines[start:] if limit is None else lines[start:start + limit]
        client.respond(request["id"], {"content": "".join(chosen)})

    def _write(self, client: AcpClient, request: dict[str, Any]) -> None:
        path = self._inside(client, request, "writeTextFile")
        if path is None:
            return
        content = (request.get("params") or {}).get("content")
        if not isinstance(content, str):
            client.respond_error(request["id"], {"code": INVALID_PARAMS, "message": "Invalid params: content is no string"})
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
        except OSError as exc:  # answered, never raised: it would end the client's reading
            client.respond_error(request["id"], {"code": INTERNAL_ERROR, "message": "Internal error",
                                                 "data": {"details": f"cannot write {path}: {exc}"}})
            return
        self.written[str(path)] = content
        client.respond(request["id"], {})

    # -- scripted answers --------------------------------------------------------------------
    def _permission(self, client: AcpClient, request: dict[str, Any]) -> None:
        params = request.get("params") or {}
        options = [o for o in params.get("options") or [] if isinstance(o, dict)]
        answer = self._scripted("permissions", request)
        if answer is _FAILED:
            client.respond(request["id"], {"outcome": {"outcome": "cancelled"}})
            return
        chosen = next((o for o in options if o.get("optionId") == answer), None)
        if chosen is None and answer in _KINDS:
            chosen = next((o for o in options if o.get("kind") in _KINDS[str(answer)]), None)
        elif chosen is None and answer is not None:
            self.problems.append(f"the permissions callable answered {answer!r}, which is neither 'allow', 'reject', None "
                                 f"nor an optionId of {[o.get('optionId') for o in options]}")
        outcome = {"outcome": "selected", "optionId": chosen["optionId"]} if chosen else {"outcome": "cancelled"}
        client.respond(request["id"], {"outcome": outcome})

    def _elicit(self, client: AcpClient, request: dict[str, Any]) -> None:
        if not isinstance((self.capabilities.get("elicitation") or {}).get("form"), dict):
            client.respond_error(request["id"], {"code": METHOD_NOT_FOUND, "message": "Method not found: elicitation/create"})
            return
        answer = self._scripted("elicitation", request)
        if isinstance(answer, Mapping):
            client.respond(request["id"], dict(answer))
            return
        if answer is not _FAILED:
            self.problems.append(f"the elicitation callable answered {answer!r}, not a result object such as "
                                 "{'action': 'accept', 'content': {...}}")
        client.respond_error(request["id"], {"code": INTERNAL_ERROR, "message": "Internal error"})

    def _scripted(self, name: str, request: dict[str, Any]) -> Any:
        """The test's callable asked about this request; _FAILED (kept in problems) if it raised."""
        script = self._permissions if name == "permissions" else self._elicitation
        assert callable(script)
        try:
            return script(request.get("params") or {})
        except Exception as exc:  # the test's own mistake: reported at the end, the agent gets an answer now
            self.problems.append(f"the {name} callable raised {type(exc).__name__}: {exc} (asked {request.get('params')})")
            return _FAILED


_FAILED = object()
