"""tools/rig/chat_files: is_inside keeps a sibling whose name only starts with the directory's outside; a
write never follows a last symlink put in place after it was shown."""

from __future__ import annotations

import pytest

from acp_green.tools.rig.chat_files import FileRequestRefused, Written, apply_write, is_inside


def test_a_sibling_sharing_the_directorys_name_as_a_prefix_is_outside(tmp_path):
    (tmp_path / "proj").mkdir()
    (tmp_path / "project-secrets").mkdir()
    assert is_inside(str(tmp_path / "proj"), str(tmp_path / "proj"))
    assert is_inside(str(tmp_path / "proj" / "a.txt"), str(tmp_path / "proj"))
    assert not is_inside(str(tmp_path / "project-secrets" / "key"), str(tmp_path / "proj"))
    assert not is_inside(str(tmp_path / "projx"), str(tmp_path / "proj"))
    assert not is_inside(str(tmp_path), str(tmp_path / "proj"))


def test_a_write_whose_file_became_a_symlink_after_it_was_shown_is_refused(tmp_path):
    """The user approved writing proj/a.txt; if a.txt is swapped for a symlink before the write,
    the write must not follow it out of the directory."""
    (tmp_path / "proj").mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    target = tmp_path / "proj" / "a.txt"
    written = Written(str(target), None, "evil", real_path=str(target))
    target.symlink_to(outside)  # swapped after the write was shown
    with pytest.raises(FileRequestRefused):
        apply_write(written)
    assert outside.read_text() == "keep"
