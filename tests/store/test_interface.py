"""The store's one interface (`store.base.Store`) and the typed operations the SQLite store
queues: which writes are handed to the store thread at once is a property of their type."""

from __future__ import annotations

import inspect
import typing

import pytest

from acp_green import sessions as sessions_module
from acp_green.sessions import SessionRegistry
from acp_green.store.base import MemoryStore, Store
from acp_green.store import operations
from acp_green.store.operations import Write
from acp_green.store.threaded import ThreadedStore

STORE_METHODS = (
    "save_session", "load_session", "delete_session", "list_sessions", "begin_turn", "append_history",
    "end_turn", "history_page", "turns", "append_turn", "history", "record_usage", "usage", "sync", "close",
    "claim_session", "own_new_session", "release_session",
)


def test_one_store_interface_is_what_the_registry_and_both_stores_use():
    """Store: the session registry is typed against `store.base.Store` (no second
    protocol of its own), and both stores implement every method with Store's exact signature."""
    assert typing.get_type_hints(SessionRegistry.__init__)["store"] is Store
    assert not [name for name in vars(sessions_module) if name.endswith("StoreLike")]
    for name in STORE_METHODS:
        expected = inspect.signature(getattr(Store, name), eval_str=True)
        for implementation in (MemoryStore, ThreadedStore):
            assert inspect.signature(getattr(implementation, name), eval_str=True) == expected, (implementation, name)


def test_a_write_type_must_say_whether_it_is_handed_over_at_once():
    """Store: "handed over at once" lives in the write's type; a new write that does
    not say it is refused when it is defined, instead of silently waiting on the hub."""
    with pytest.raises(TypeError, match="at_once"):
        class Forgetful(Write):  # noqa: F841 - defining it is the test
            label = "forgetful"
    writes = (
        operations.SaveSession, operations.DeleteSession, operations.BeginTurn, operations.AppendHistory,
        operations.EndTurn, operations.MarkIncomplete, operations.RecordUsage,
    )
    assert {cls.label: cls.at_once for cls in writes} == {
        "save_session": False, "delete_session": True, "begin_turn": True, "append_history": False,
        "end_turn": True, "mark_incomplete": False, "record_usage": True,
    }


def test_an_operation_takes_exactly_its_fields_and_is_not_changed_once_made():
    piece = operations.AppendHistory("s1", "t1", [b"{}"])
    assert (piece.session_id, piece.turn_id, piece.updates) == ("s1", "t1", [b"{}"])
    assert repr(piece) == "AppendHistory(session_id='s1', turn_id='t1', updates=[b'{}'])"
    with pytest.raises(TypeError, match="takes 3 fields"):
        operations.AppendHistory("s1", "t1")
    with pytest.raises(AttributeError):
        piece.session_id = "s2"


def test_an_operation_refuses_extra_fields_and_deletion():
    """Too many fields is refused like too few; `del` cannot change a made operation either."""
    with pytest.raises(TypeError, match="takes 1 fields"):
        operations.DeleteSession("s1", "s2")
    with pytest.raises(TypeError, match="takes 0 fields"):
        operations.Sync("extra")
    doomed = operations.DeleteSession("s1")
    with pytest.raises(AttributeError):
        del doomed.session_id
    assert doomed.session_id == "s1"


def test_an_operation_subclass_takes_its_parents_fields_first_then_its_own():
    """Fields are those of every class of the operation, in order: a subclass that adds one
    still takes (and sets) its parent's."""

    class LoadSessionFrom(operations.LoadSession):
        __slots__ = ("cwd",)

    load = LoadSessionFrom("s1", "/tmp")
    assert (load.session_id, load.cwd) == ("s1", "/tmp")
    assert repr(load) == "LoadSessionFrom(session_id='s1', cwd='/tmp')"


def test_an_operation_can_be_copied():
    import copy

    piece = operations.AppendHistory("s1", "t1", [b"{}"])
    assert repr(copy.copy(piece)) == repr(piece)
    deep = copy.deepcopy(piece)
    assert repr(deep) == repr(piece) and deep.updates is not piece.updates
