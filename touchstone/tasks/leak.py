"""Does a task's workspace (or statement) reveal its answer?

Two checks, both host-side and static:
1. artifacts that carry history or stale copies: VCS directories, bytecode
   caches, backup/patch files;
2. the reference's changed code: for every file the reference changes, the
   changed lines *with one line of context on each side* must appear in no
   workspace file and not in the statement. The context makes an accidental
   match of a common line (`return result`) practically impossible while a
   backup copy, a stale duplicate or a pasted answer is caught.
"""

from __future__ import annotations

import difflib
import fnmatch
from pathlib import Path

from touchstone.tasks.schema import Task

ARTIFACTS = [".git", ".hg", ".svn", ".bzr", "__pycache__", "*.pyc", "*.pyo", ".pytest_cache", "*.orig",
             "*.rej", "*.bak", "*.swp", "*~", ".#*", "*.patch", "*.diff"]


def _norm(lines: list[str]) -> str:
    return "\n".join(" ".join(line.split()) for line in lines if line.strip())


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def answer_windows(reference: str, workspace: str | None) -> list[str]:
    """Normalized text blocks of the reference that the workspace version lacks:
    each changed run of lines plus one line of context before and after."""
    ref = reference.splitlines()
    old = workspace.splitlines() if workspace is not None else []
    windows = []
    matcher = difflib.SequenceMatcher(a=old, b=ref, autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert") and j2 > j1:
            block = _norm(ref[max(0, j1 - 1):j2 + 1])
            if len(block) >= 12:  # a lone `)` or `pass` reveals nothing
                windows.append(block)
    return windows


def find_leaks(task: Task) -> list[str]:
    """Problems found, each naming the file; empty when the task leaks nothing."""
    ws = task.workspace_dir
    problems = [f"workspace/{p.relative_to(ws).as_posix()}: {why}" for p, why in _artifacts(ws)]
    ref_dir = task.reference_dir
    if ref_dir is None:
        return problems
    texts = {p.relative_to(ws).as_posix(): _norm(t.splitlines())
             for p in ws.rglob("*") if p.is_file() and (t := _read_text(p)) is not None}
    statement = _norm(task.statement.splitlines())
    for ref_file in sorted(p for p in ref_dir.rglob("*") if p.is_file()):
        rel = ref_file.relative_to(ref_dir).as_posix()
        ref_text = _read_text(ref_file)
        if ref_text is None:
            continue
        current = ws / rel
        for window in answer_windows(ref_text, _read_text(current) if current.is_file() else None):
            problems += [f"workspace/{name}: contains the reference's change to {rel}"
                         for name, text in texts.items() if window in text]
            if window in statement:
                problems.append(f"task.json statement: contains the reference's change to {rel}")
    return problems


def _artifacts(root: Path) -> list[tuple[Path, str]]:
    found = []
    for p in sorted(root.rglob("*")):
        if any(fnmatch.fnmatch(p.name, pat) for pat in ARTIFACTS):
            found.append((p, "history/cache/backup artifact"))
    return found
