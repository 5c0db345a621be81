from __future__ import annotations

from pathlib import Path

import pytest

from touchstone.sandbox import Limits, open_sandbox


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A small project: a module, its test, and a data file."""
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text(
        "from pkg.calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (root / "notes.txt").write_text("first line\n")
    return root


@pytest.fixture
def sb(workspace: Path, sandbox_backend: str, tmp_path: Path):
    """An open sandbox on `workspace` for each backend, with tight quick limits."""
    limits = Limits(timeout_s=20, memory_bytes="256m", processes=64)
    with open_sandbox(workspace, sandbox_backend, limits=limits, action_log=tmp_path / "actions.jsonl") as box:
        yield box
