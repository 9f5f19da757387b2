"""Sessions: live handles, per-session reservations, their current cancellation token, idle eviction."""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import gevent
from gevent.event import AsyncResult

from .rpc import wire
from .rpc.cancel import CancelToken
from .errors import SessionInUse, StateNotStorable, UnknownSession
from .store.interface import Store
from .store.session_record import SessionRecord

log = logging.getLogger(__name__)


class ToolCallIds:
    """The tool call ids a session has announced, to refuse one announced twice (ACP: unique per session).

    Bounded: the last LIMIT ids are remembered (a few hundred KiB for ids of ordinary length,
    however long the session), and a reuse of an older one goes unnoticed. It lives with the live session, so
    it starts empty when an evicted session comes back or the process restarts; ids the runtime
    generates cannot collide even then (update_checks.PROCESS_TAG), ids an agent chooses itself can.
    """

    LIMIT = 4096

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[str, None] = {}  # insertion order: the oldest is forgotten first

    def announce(self, where: str, tool_call_id: str) -> None:
        """Remember `tool_call_id`; ValueError naming it when this session announced it already."""
        if tool_call_id in self._seen:
            raise ValueError(f"{where}: the tool call id {wire.excerpt(tool_call_id)!r} was already used in this session; "
                             "ids must be unique within a session (omit the id to get a fresh one)")
        self._seen[tool_call_id] = None
        if len(self._seen) > self.LIMIT:
            del self._seen[next(iter(self._seen))]

    def __contains__(self, tool_call_id: object) -> bool:
        return tool_call_id in self._seen

    def __len__(self) -> int:
        return len(self._seen)


MAX_STATE_BYTES = 1 << 20  # a session's encoded state (all its keys together) is at most 1 MiB


def encode_state(state: Any) -> bytes:
    """`session.state` as the JSON the store keeps; StateNotStorable naming the key that cannot be.

    Values must be JSON (dicts with str keys, lists, str, int, float other than NaN/inf, bool,
    None); tuples are stored as lists. Each key is encoded on its own so the error names it.
    """
    if not isinstance(state, dict):
        raise StateNotStorable("", f"session.state must be a dict, not {type(state).__name__}")
    parts: list[bytes] = []
    sizes: dict[str, int] = {}
    for key, value in state.items():
        if not isinstance(key, str):
            raise StateNotStorable(repr(key), "keys must be str")
        try:
            encoded = _dumps(value)
        except (TypeError, ValueError, RecursionError) as exc:
            raise StateNotStorable(key, f"not JSON-serialisable ({type(exc).__name__}: {exc})") from None
        parts.append(_dumps(key) + b":" + encoded)
        sizes[key] = len(encoded)
    data = b"{" + b",".join(parts) + b"}"
    if len(data) > MAX_STATE_BYTES:
        largest = max(sizes, key=sizes.__getitem__)
        raise StateNotStorable(largest, f"the state is {len(data)} bytes encoded, over the limit of {MAX_STATE_BYTES} "
                                        f"(this key holds {sizes[largest]})")
    return data


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def decode_state(session_id: str, data: bytes | None) -> dict[str, Any]:
    """The stored state back as a dict; a damaged one is logged and starts empty."""
    if data is None:
        return {}
    try:
        state = json.loads(data.decode("utf-8", "surrogatepass"))
    except ValueError as exc:
        log.error("the stored state of session %s is not JSON (%s); starting with an empty state", ascii(session_id), exc)
        return {}
    if not isinstance(state, dict):
        log.error("the stored state of session %s is not a JSON object; starting with an empty state", ascii(session_id))
        return {}
    return state


class Session:
    """A live session handle: its record, its current token and its one prompt reservation."""

    def __init__(self, record: SessionRecord, mcp_servers: list[dict[str, Any]] | None = None) -> None:
        self.record = record
        self.mcp_servers = list(mcp_servers or [])
        self.token = CancelToken()
        self.active_prompt: object | None = None
        self.last_active = time.monotonic()
        self.state: dict[str, Any] = {}  # the agent's own per-session data, stored (see SessionRegistry.store_state)
        self.stored_state = b"{}"  # the state as last stored: an unchanged state is not written again
        self.resources: list[Callable[[], None]] = []  # closers run when the session ends
        self.closing = False  # session/close arrived while a prompt ran: drop it when that ends
        self.deleted = False  # session/delete: nothing more of it may reach the store
        self.tool_call_ids = ToolCallIds()  # announced in this session: an id used twice is refused

    @property
    def session_id(self) -> str:
        return self.record.session_id

    @property
    def busy(self) -> bool:
        return self.active_prompt is not None

    def touch(self) -> None:
        self.last_active = time.monotonic()

    def reserve(self, owner: object) -> CancelToken:
        """Reserve the session for one prompt and bind the current token to it (S8, S11)."""
        self.active_prompt = owner
        self.touch()
        return self.token

    def release(self, owner: object) -> None:
        """Idempotent: only the owner's reservation is released (S14)."""
        if self.active_prompt is owner:
            self.active_prompt = None
            self.touch()

    def cancel(self) -> None:
        """Set the current token and install a fresh one for future turns (S12)."""
        token, self.token = self.token, CancelToken()
        token.set()

    def cancel_bound(self, token: CancelToken) -> None:
        """Cancel the job that was bound `token`; if it is still current, install a fresh one (S12)."""
        if self.token is token:
            self.cancel()
        else:
            token.set()

    def close_resources(self) -> None:
        closers, self.resources = self.resources, []
        for close in reversed(closers):
            try:
                close()
            except Exception:
                log.exception("closing a resource of session %s failed", self.session_id)


# session/close answers once the session is let go in the store, but a session whose prompt was
# still running is let go when that prompt ends, and a PostgreSQL server drops a dead agent's
# locks once it notices the connection gone (a few milliseconds): a claim refused is asked again
# for this long before the refusal is final. The connection's other control requests wait
# meanwhile, so it stays short.
CLAIM_PATIENCE = 0.25
CLAIM_RETRY = 0.025


class SessionClaims:
    """Which connection of this process holds each live session: one at a time, and, through
    the store, no session live in two processes.

    A connection's `SessionRegistry` claims a session when it makes it live (new, fork, a
    revival from the store) and releases it when it lets go (close, delete, eviction, the
    connection's end). Another connection naming a claimed session is refused `SessionInUse`;
    so is a claim of a session another process holds (the store's lock: store/database.py),
    naming that process. The first claim of a stored session waits for the store's answer;
    another claim of it by the same connection meanwhile waits for that answer too.
    """

    def __init__(self, store: Store | None = None) -> None:
        self._owners: dict[str, str] = {}
        self._store = store  # None: this process is the store's only user (tests)
        self._deciding: dict[str, AsyncResult] = {}  # claims waiting for the store's answer

    def claim(self, session_id: str, owner: str, *, new: bool = False) -> None:
        """Hold `session_id` for `owner`; SessionInUse naming the holder if another connection,
        or another process, holds it. `new`: a session this process has just made."""
        held = session_id in self._owners
        holder = self._owners.setdefault(session_id, owner)
        if holder != owner:
            raise SessionInUse(session_id, holder)
        deciding = self._deciding.get(session_id)
        if deciding is not None:
            deciding.get()  # raises as the first claim did
            return
        if held or self._store is None:
            return  # held already (the same connection again), or nobody else to ask
        if new:
            self._store.own_new_session(session_id)
            return
        self._ask_store(session_id, owner, self._store)

    def _ask_store(self, session_id: str, owner: str, store: Store) -> None:
        decided = self._deciding[session_id] = AsyncResult()
        try:
            elsewhere = store.claim_session(session_id)
            patience = time.monotonic() + CLAIM_PATIENCE
            while elsewhere is not None and time.monotonic() < patience:
                gevent.sleep(CLAIM_RETRY)
                elsewhere = store.claim_session(session_id)
            if elsewhere is not None:
                raise SessionInUse(session_id, elsewhere)
        except BaseException as exc:  # ok: undoes the claim, tells whoever waits, re-raises
            if self._owners.get(session_id) == owner:
                del self._owners[session_id]
            decided.set_exception(exc if isinstance(exc, Exception) else SessionInUse(session_id, "a claim that was killed"))
            raise
        else:
            decided.set(None)
        finally:
            del self._deciding[session_id]

    def release(self, session_id: str, owner: str) -> None:
        if self._owners.get(session_id) == owner and session_id not in self._deciding:
            del self._owners[session_id]
            if self._store is not None:
                self._store.release_session(session_id)

    def owner_of(self, session_id: str) -> str | None:
        return self._owners.get(session_id)

    def __len__(self) -> int:
        return len(self._owners)


class SessionRegistry:
    """One connection's live sessions by id; evicted ones come back from the store without
    replay (S15). `claims` is shared by every connection of the process (`SessionClaims`)."""

    def __init__(self, store: Store, idle_timeout: float, claims: SessionClaims | None = None, owner: str = "stdio") -> None:
        self._store = store
        self._claims = claims if claims is not None else SessionClaims(store)
        #: This connection's name in `claims`, and in the error another connection is refused with.
        self.owner = owner
        self._live: dict[str, Session] = {}
        # MCP server declarations of evicted sessions (a few small dicts, never processes), so a
        # revived session gets them back; the store does not keep them (they may hold secrets).
        self._dormant_mcp: dict[str, list[dict[str, Any]]] = {}
        self.idle_timeout = idle_timeout

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self._live.values()))

    def create(self, cwd: str, additional_directories: list[str], mcp_servers: list[dict[str, Any]]) -> Session:
        record = SessionRecord(session_id=new_session_id(), cwd=cwd, additional_directories=list(additional_directories))
        session = Session(record, mcp_servers)
        self._claims.claim(record.session_id, self.owner, new=True)
        self._live[record.session_id] = session
        self._store.save_session(record)
        return session

    def fork_of(self, source: Session, cwd: str, additional_directories: list[str], mcp_servers: list[dict[str, Any]]) -> Session:
        """session/fork: a new session, neither live nor stored yet (see `add_fork`), with the source's
        title, mode and options and a copy of its state as last stored.

        The state of a source that is not running a turn is stored first, so the copy is its state
        now; a running turn's state is its own until the turn ends (or it saves it), so a fork of a
        prompting session gets the state of its last finished turn, as it gets its history.
        """
        if not source.busy:
            self.store_state(source)
        parent = source.record
        record = SessionRecord(new_session_id(), cwd, list(additional_directories), parent.title, parent.mode_id,
                               json.loads(json.dumps(parent.config)), forked_from=source.session_id)
        fork = Session(record, mcp_servers)
        fork.state = decode_state(record.session_id, source.stored_state)
        return fork

    def add_fork(self, source: Session, fork: Session) -> None:
        """Make `fork` live and store it with the source's ended turns and the fork's state;
        StateNotStorable (nothing stored, nothing live) when that state cannot be stored."""
        state = encode_state(fork.state)
        self._claims.claim(fork.session_id, self.owner, new=True)
        self._live[fork.session_id] = fork
        self._store.save_session(fork.record)
        self._store.fork_history(source.session_id, fork.session_id)
        self._store.save_state(fork.session_id, state)
        fork.stored_state = state

    def set_archived(self, session_id: str, archived: bool) -> None:
        """session/archive and unarchive: archiving closes a live session first (as session/close);
        UnknownSession for a session neither live nor stored. The session's `updated_at` is kept."""
        session = self._live.get(session_id)
        if session is None:
            with self._borrowed(session_id):
                record = self._store.load_session(session_id)
                if record is None:
                    raise UnknownSession(session_id)
                if archived:
                    self._dormant_mcp.pop(session_id, None)  # archiving closes: its servers are not revived
                record.archived = archived
                self._store.save_session(record)
            return
        if archived:
            self.close(session_id)
        session.record.archived = archived
        self._store.save_session(session.record)

    def set_title(self, session_id: str, title: str) -> None:
        """session/set_title, live or stored; UnknownSession for neither. `updated_at` is kept."""
        session = self._live.get(session_id)
        if session is None:
            with self._borrowed(session_id):
                record = self._store.load_session(session_id)
                if record is None:
                    raise UnknownSession(session_id)
                record.title = title
                self._store.save_session(record)
            return
        session.record.title = title
        self._store.save_session(session.record)

    @contextlib.contextmanager
    def _borrowed(self, session_id: str) -> Iterator[None]:
        """Hold a session that is not live here while its stored record is changed: refused
        (SessionInUse) when another connection or process has it live, whose copy would
        overwrite the change; let go once the change is queued, unless it became live meanwhile."""
        self._claims.claim(session_id, self.owner)
        try:
            yield
        finally:
            if session_id not in self._live:
                self._claims.release(session_id, self.owner)

    def get(self, session_id: Any) -> Session:
        """The live session, revived from the store if it was evicted; UnknownSession otherwise."""
        if not isinstance(session_id, str):
            raise UnknownSession(session_id)
        session = self._live.get(session_id)
        if session is None:
            # Claimed before the store is read (a yield): a delete or a load by another connection
            # meanwhile is refused, rather than both succeeding and the deleted session coming back.
            self._claims.claim(session_id, self.owner)
            try:
                record = self._store.load_session(session_id)
                if record is None:
                    raise UnknownSession(session_id)
                stored = self._store.load_state(session_id)
            except BaseException:  # ok: frees the claim and re-raises, a kill included
                if session_id not in self._live:
                    self._claims.release(session_id, self.owner)
                raise
            session = self._live.get(session_id)  # revived meanwhile by another request of ours
            if session is None:
                session = Session(record, self._dormant_mcp.pop(session_id, None))
                session.state = decode_state(session_id, stored)
                if stored is not None:
                    session.stored_state = stored
                self._live[session_id] = session
                log.debug("session %s revived from the store", session_id)
        session.touch()
        return session

    def reopen(self, session_id: Any, cwd: str, additional_directories: list[str], mcp_servers: list[dict[str, Any]]) -> Session:
        """session/load and session/resume: the session, now with the client's cwd and servers; stored
        with a new `updated_at` only if its cwd or directories changed (its place in session/list)."""
        session = self.get(session_id)
        record, directories = session.record, list(additional_directories)
        if (record.cwd, record.additional_directories) != (cwd, directories):
            record.cwd, record.additional_directories = cwd, directories
            self.save(session)
        session.mcp_servers = list(mcp_servers)  # not stored (see `_dormant_mcp`)
        return session

    def close(self, session_id: str) -> bool:
        """session/close: cancel as session/cancel would, then free; False if it was not live.

        A running prompt keeps its reservation until it answers (S8), so a closing session
        stays live until then and `prompt_ended` frees it.
        """
        self._dormant_mcp.pop(session_id, None)
        session = self._live.get(session_id)
        if session is None:
            return False
        if session.busy:
            session.cancel()
            session.closing = True
        else:
            self.drop(session_id)
        return True

    def delete(self, session_id: str) -> None:
        """session/delete: cancel a running prompt, forget the session here and in the store."""
        if session_id not in self._live:
            with self._borrowed(session_id):  # not while another connection or process has it live
                self._dormant_mcp.pop(session_id, None)
                self._store.delete_session(session_id)
            return
        self._dormant_mcp.pop(session_id, None)
        session = self._live.pop(session_id)
        session.deleted = True
        if session.busy:
            session.cancel()  # its resources are freed when the prompt ends
        else:
            session.close_resources()
        self._store.delete_session(session_id)
        self._claims.release(session_id, self.owner)  # after the delete: nobody revives it meanwhile

    def prompt_ended(self, session: Session) -> None:
        """A prompt released `session`: finish a close or delete that waited for it."""
        if session.busy:
            return
        if session.deleted:
            _off_hub(session.close_resources)
        elif session.closing and self._live.get(session.session_id) is session:
            self._live.pop(session.session_id, None)
            self.store_state(session)
            self._claims.release(session.session_id, self.owner)
            _off_hub(session.close_resources)

    def is_live(self, session_id: str) -> bool:
        return session_id in self._live

    def live(self, session_id: str) -> Session | None:
        """The session if it is in memory now; never reads the store."""
        return self._live.get(session_id)

    def save(self, session: Session) -> None:
        session.record.updated_at = time.time()
        self._store.save_session(session.record)

    def save_state(self, session: Session) -> None:
        """Store `session.state` now if it changed; StateNotStorable (nothing stored) if it cannot be."""
        data = encode_state(session.state)
        if data != session.stored_state and not session.deleted:
            self._store.save_state(session.session_id, data)
            session.stored_state = data

    def store_state(self, session: Session) -> bool:
        """`save_state` where no one can be told (a turn's end, a close, an eviction): an
        unstorable state is logged at ERROR naming the key and the session, and the state stored
        before stays; never raises. False if it was not stored."""
        try:
            self.save_state(session)
        except StateNotStorable as exc:
            log.error("session %s: the agent's state was not stored (the previous one is kept): %s", ascii(session.session_id), exc)
            return False
        except Exception:
            log.exception("session %s: storing the agent's state failed", ascii(session.session_id))
            return False
        return True

    def drop(self, session_id: str) -> Session | None:
        """Forget a live session, freeing its resources; the store keeps its record."""
        session = self._live.pop(session_id, None)
        if session is not None:
            if not session.deleted:
                self.store_state(session)
            self._claims.release(session_id, self.owner)
            session.close_resources()
        return session

    def evict_idle(self, now: float | None = None) -> list[str]:
        """Evict sessions idle longer than the timeout; never one with an active prompt (S15)."""
        now = time.monotonic() if now is None else now
        evicted = [
            sid
            for sid, session in self._live.items()
            if not session.busy and now - session.last_active > self.idle_timeout
        ]
        for sid in evicted:
            session = self.drop(sid)
            if session is not None and session.mcp_servers:
                self._dormant_mcp[sid] = session.mcp_servers
        if evicted:
            log.debug("evicted %d idle sessions", len(evicted))
        return evicted


def new_session_id() -> str:
    return f"sess_{uuid.uuid4().hex}"


def _off_hub(fn: Callable[[], None]) -> None:
    """Run `fn` now, or in a new greenlet when called from the hub, where it must not block."""
    if gevent.getcurrent() is gevent.get_hub():
        gevent.spawn(fn)
    else:
        fn()

