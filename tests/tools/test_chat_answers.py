"""What chat makes of a typed answer (chat_answers.py) and of the agent's file requests (chat_files.py):
every typed line has exactly one meaning, and only absolute paths reach the disk."""

from __future__ import annotations

import math
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.tools.rig import chat_files
from acp_green.tools.rig.chat_answers import Choice, Invalid, field_value, permission_choices, pick

KINDS = ("allow_once", "allow_always", "reject_once", "reject_always")
options = st.lists(
    st.fixed_dictionaries({"optionId": st.text(min_size=1, max_size=8), "name": st.text(max_size=12), "kind": st.sampled_from(KINDS)}),
    min_size=1, max_size=5,
)
FEW = settings(deadline=None, max_examples=150)


@FEW
@given(options, st.text(max_size=20))
def test_any_typed_line_picks_an_offered_option_or_nothing(offered, typed):
    choices = permission_choices(offered)
    found = pick(typed, choices)
    assert found is None or any(found is choice for choice in choices)


@FEW
@given(options, st.data())
def test_each_option_is_picked_by_its_number_whatever_the_blanks(offered, data):
    choices = permission_choices(offered)
    number = data.draw(st.integers(1, len(choices)))
    padding = data.draw(st.sampled_from(["", " ", "\t", "  \n"]))
    assert pick(f"{padding}{number}{padding}", choices) is choices[number - 1]
    assert pick(str(len(choices) + 1), choices) is None and pick("0", choices) is None


@FEW
@given(options)
def test_the_short_words_belong_to_one_option_each_and_pick_it_in_any_case(offered):
    choices = permission_choices(offered)
    words = [word for choice in choices for word in choice.words]
    assert len(words) == len(set(words))
    for choice in choices:
        for word in choice.words:
            assert pick(word.upper(), choices) is choice
        assert set(choice.words) <= {"y", "yes", "once", "a", "always", "n", "no", "reject", "never"}


def test_the_kinds_have_the_keys_shown_in_the_question():
    offered = [{"optionId": k, "name": k, "kind": k} for k in KINDS]
    assert [pick(word, permission_choices(offered)).value["kind"] for word in ("y", "a", "n", "never")] == list(KINDS)
    assert pick("", permission_choices(offered)) is None
    assert pick("Allow", [Choice("allow", (), 1), Choice("ALLOW", (), 2)]) is None  # two labels alike: unclear


@FEW
@given(st.integers(-10**6, 10**6), st.integers(-100, 100), st.integers(0, 200))
def test_an_integer_field_takes_typed_integers_within_its_bounds(value, low, span):
    schema = {"type": "integer", "minimum": low, "maximum": low + span}
    got = field_value(f" {value}\n", schema)
    assert got == value if low <= value <= low + span else isinstance(got, Invalid)


@FEW
@given(st.text(max_size=30), st.sampled_from(["integer", "number", "boolean", "string"]))
def test_any_typed_line_is_a_value_of_the_field_type_or_a_reason(typed, kind):
    got = field_value(typed, {"type": kind})
    if isinstance(got, Invalid):
        assert got.reason
    elif kind == "integer":
        assert type(got) is int
    elif kind == "number":
        assert isinstance(got, (int, float)) and math.isfinite(got)
    elif kind == "boolean":
        assert type(got) is bool
    else:
        assert got == typed.rstrip("\r\n")


@FEW
@given(st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=4, unique=True), st.data())
def test_an_enum_field_takes_a_value_or_its_number_and_nothing_else(values, data):
    schema = {"type": "string", "enum": values}
    index = data.draw(st.integers(0, len(values) - 1))
    assert field_value(str(index + 1), schema) == values[index]
    typed = data.draw(st.text(max_size=6))
    assert isinstance(field_value(typed, schema), Invalid) or field_value(typed, schema) in values


def test_boolean_and_bounded_fields():
    assert field_value("Yes\n", {"type": "boolean"}) is True
    assert field_value("no", {"type": "boolean"}) is False
    assert isinstance(field_value("nan", {"type": "number"}), Invalid)
    assert isinstance(field_value("ab", {"type": "string", "minLength": 3}), Invalid)
    assert isinstance(field_value("x", {"type": "array"}), Invalid)


@FEW
@given(st.text(max_size=20).filter(lambda p: not os.path.isabs(p)))
def test_a_relative_path_is_refused_before_the_disk_is_touched(path):
    for serve in (chat_files.read_text, chat_files.write_text):
        with pytest.raises(chat_files.FileRequestRefused) as refused:
            serve({"path": path, "content": "x"})
        assert refused.value.code == chat_files.INVALID_PARAMS


def test_files_are_really_read_and_written(tmp_path):
    target = tmp_path / "f.txt"
    assert chat_files.write_text({"path": str(target), "content": "a\nb\nc\n"}) == chat_files.Written(str(target), None, "a\nb\nc\n")
    assert target.read_text() == "a\nb\nc\n"
    assert chat_files.read_text({"path": str(target)}) == "a\nb\nc\n"
    assert chat_files.read_text({"path": str(target), "line": 2, "limit": 1}) == "b\n"
    assert chat_files.write_text({"path": str(target), "content": "z"}).old_text == "a\nb\nc\n"
    with pytest.raises(chat_files.FileRequestRefused) as missing:
        chat_files.read_text({"path": str(tmp_path / "nope")})
    assert missing.value.to_error()["code"] == -32002
    with pytest.raises(chat_files.FileRequestRefused) as no_dir:
        chat_files.write_text({"path": str(tmp_path / "no" / "dir.txt"), "content": "x"})
    assert no_dir.value.code == chat_files.INTERNAL_ERROR and not (tmp_path / "no").exists()
