"""A turn whose updates span several store pages reads back whole in the conversation
(acp_green.conversation.Conversation pages a turn's updates as replay does)."""

from __future__ import annotations

import pytest

from acp_green import conversation
from acp_green.conversation import Conversation
from acp_green.store.base import MemoryStore
from acp_green.store.turns import TurnOutcome
from tests.store.test_conversation_pages import agent, user


@pytest.mark.parametrize("page_entries", [2, 3, conversation.UPDATE_PAGE_ENTRIES])
def test_a_turn_longer_than_a_page_of_updates_reads_back_whole(monkeypatch, page_entries):
    monkeypatch.setattr(conversation, "UPDATE_PAGE_ENTRIES", page_entries)
    store = MemoryStore()
    store.begin_turn("s", "t0", 1.0, [user("question")])
    store.append_history("s", "t0", [agent(f"part{i} ", "m1") for i in range(10)])
    store.end_turn("s", "t0", TurnOutcome("end_turn"))
    turns = list(Conversation(store, "s"))
    assert len(turns) == 1
    assert turns[0].reply_text == "".join(f"part{i} " for i in range(10))
