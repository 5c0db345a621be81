"""The one tree composer: what ends up in a graded tree, and in which order."""

import os
import subprocess
from pathlib import Path

import pytest

from touchstone.harness import PatchError, compose_tree


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_layers_apply_in_order_and_the_hidden_tests_win(tmp_path):
    ws = _write(tmp_path / "ws", {"m.py": "ws\n", "gone.py": "x\n", "tests/test_m.py": "visible\n"})
    ref = _write(tmp_path / "ref", {"m.py": "ref\n", "n.py": "ref\n"})
    hidden = _write(tmp_path / "hidden", {"tests/test_m.py": "hidden\n"})
    tree = compose_tree(
        tmp_path / "t",
        ws,
        overlays=[ref],
        files={"n.py": "mutant\n", "tests/test_m.py": b"forged\n"},
        deleted=["gone.py"],
        tests=hidden,
    )
    read = {p.relative_to(tree).as_posix(): p.read_text() for p in tree.rglob("*") if p.is_file()}
    assert read == {"m.py": "ref\n", "n.py": "mutant\n", "tests/test_m.py": "hidden\n"}


def test_symlinks_and_caches_never_reach_the_tree(tmp_path):
    ws = _write(tmp_path / "ws", {"m.py": "x\n", "__pycache__/m.cpython-311.pyc": "", "pkg/stale.pyc": ""})
    os.symlink("/etc/passwd", ws / "link.py")
    tree = compose_tree(tmp_path / "t", ws)
    assert sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*")) == ["m.py", "pkg"]


def test_a_patch_applies_and_a_bad_one_is_a_loud_error(tmp_path):
    ws = _write(tmp_path / "ws", {"m.py": "a = 1\n"})
    work = _write(tmp_path / "git", {"m.py": "a = 1\n"})
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    subprocess.run(["git", "add", "."], cwd=work, check=True)
    (work / "m.py").write_text("a = 2\n")
    patch = subprocess.run(["git", "diff"], cwd=work, capture_output=True, text=True, check=True).stdout
    assert (compose_tree(tmp_path / "t1", ws, patch=patch) / "m.py").read_text() == "a = 2\n"
    bad = patch.replace("-a = 1", "-a = 7")
    with pytest.raises(PatchError, match="does not apply: .*m.py"):
        compose_tree(tmp_path / "t2", ws, patch=bad)
    assert (tmp_path / "t2" / "m.py").read_text() == "a = 1\n"  # all or nothing
