"""The two copies of the tests' temporary directory (remote/tmpsync.py): what
one side sends is plain data, and what the other applies never leaves its
own root, never follows a link, and never takes a link from the candidate."""

from __future__ import annotations

import os

import pytest

from touchstone.harness.isolation.remote.tmpsync import SyncRefused, TmpSync


def test_changes_cross_as_files_dirs_modes_and_deletions(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    sender, receiver = TmpSync(str(a), accept_links=True), TmpSync(str(b), accept_links=False)
    (a / "d" / "e").mkdir(parents=True)
    (a / "d" / "e" / "f.bin").write_bytes(b"\x00\xffdata")
    os.chmod(a / "d" / "e" / "f.bin", 0o755)
    receiver.apply(sender.delta())
    assert (b / "d" / "e" / "f.bin").read_bytes() == b"\x00\xffdata" and os.stat(b / "d/e/f.bin").st_mode & 0o100
    assert receiver.delta() == [] and sender.delta() == []  # applied changes are not echoed back
    (a / "d" / "e" / "f.bin").unlink()
    receiver.apply(sender.delta())
    assert not (b / "d" / "e" / "f.bin").exists() and (b / "d" / "e").is_dir()


def test_a_link_from_the_candidate_never_reaches_the_judge(tmp_path):
    cand, judge = tmp_path / "cand", tmp_path / "judge"
    cand.mkdir(), judge.mkdir()
    (tmp_path / "golden.txt").write_text("secret")
    candidate, judges = TmpSync(str(cand), accept_links=True), TmpSync(str(judge), accept_links=False)
    os.symlink(tmp_path / "golden.txt", cand / "out.txt")
    judges.apply(candidate.delta())
    assert not os.path.lexists(judge / "out.txt")


@pytest.mark.parametrize("entry", [["f", "../escape", 0o644, ""], ["f", "/etc/x", 0o644, ""], ["d", "a/./b", 0o755],
                                   ["f", "ok", 0o644, "not base64!"], ["f", "ok", 0o7777, ""], ["q", "x"], "x"])  # fmt: skip
def test_a_malformed_or_escaping_change_is_refused(tmp_path, entry):
    with pytest.raises(SyncRefused):
        TmpSync(str(tmp_path), accept_links=False).apply([entry])
    assert not (tmp_path.parent / "escape").exists()


def test_a_write_through_a_planted_directory_link_is_refused(tmp_path):
    """A directory link in the receiver's copy (one a test made) is never
    followed when a change names a path below it."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir(), outside.mkdir()
    os.symlink(outside, root / "d")
    with pytest.raises(SyncRefused):
        TmpSync(str(root), accept_links=False).apply([["f", "d/x", 0o644, ""]])
    assert not (outside / "x").exists()
