"""tools/rig/chat_files.is_inside: a sibling whose name only starts with the directory's is outside."""

from __future__ import annotations

from acp_green.tools.rig.chat_files import is_inside


def test_a_sibling_sharing_the_directorys_name_as_a_prefix_is_outside(tmp_path):
    (tmp_path / "proj").mkdir()
    (tmp_path / "project-secrets").mkdir()
    assert is_inside(str(tmp_path / "proj"), str(tmp_path / "proj"))
    assert is_inside(str(tmp_path / "proj" / "a.txt"), str(tmp_path / "proj"))
    assert not is_inside(str(tmp_path / "project-secrets" / "key"), str(tmp_path / "proj"))
    assert not is_inside(str(tmp_path / "projx"), str(tmp_path / "proj"))
    assert not is_inside(str(tmp_path), str(tmp_path / "proj"))
