"""Workspace trees for grading: the diff between two sandbox snapshots, and
the one composer of the tree that is graded (pristine workspace + reference or
candidate files + pristine tests on top). Symlinks and special files are a change like any
other; they are refused by the protected-paths check (a link could point at
harness files), and never copied."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from touchstone.sandbox.workspace import WorkspaceDiff

# Interpreter caches are never graded: a hash-based .pyc planted next to the
# source would be imported instead of it.
_CACHE_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}


class PatchError(ValueError):
    """A patch that does not apply to the tree it was made for; the message holds git's reason."""


def is_cache(rel: str) -> bool:
    parts = rel.split("/")
    return any(p in _CACHE_DIRS for p in parts[:-1]) or rel.endswith((".pyc", ".pyo"))


def diff_snapshots(before: dict[str, str], after: dict[str, str]) -> WorkspaceDiff:
    """Changes between two `Sandbox.snapshot()`s, interpreter caches left out
    (digests only: no patch; whether a path is a regular file is
    `is_regular(after[rel])`)."""
    d = WorkspaceDiff()
    for rel in sorted(set(before) | set(after)):
        if is_cache(rel):
            continue
        if rel not in before:
            d.created.append(rel)
        elif rel not in after:
            d.deleted.append(rel)
        elif before[rel] != after[rel]:
            d.modified.append(rel)
    return d


def copy_regular_files(src: Path, dest: Path) -> None:
    """Copy regular files and directories only (no symlinks, no caches)."""
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = [d for d in dirnames if d not in _CACHE_DIRS and not (Path(dirpath) / d).is_symlink()]
        rel_dir = Path(dirpath).relative_to(src)
        (dest / rel_dir).mkdir(parents=True, exist_ok=True)
        for name in filenames:
            p = Path(dirpath) / name
            rel = (rel_dir / name).as_posix()
            if p.is_file() and not p.is_symlink() and not is_cache(rel):
                shutil.copyfile(p, dest / rel)


def compose_tree(
    dest: Path,
    workspace: Path,
    *,
    overlays: Sequence[Path] = (),
    files: Mapping[str, bytes | str] | None = None,
    deleted: Sequence[str] = (),
    patch: str | None = None,
    tests: Path | None = None,
) -> Path:
    """The one tree composer: dest = the pristine `workspace`, then each
    overlay directory (a reference), then `files` (relative path -> content:
    a candidate's changed files, a mutant) minus `deleted`, then an agent's
    `patch`, then the hidden `tests` last, so nothing can replace them.
    Regular files only: no symlinks, no interpreter caches. Raises
    `PatchError` for a patch that does not apply: the tree without it is
    never what gets graded."""
    copy_regular_files(workspace, dest)
    for overlay in overlays:
        copy_regular_files(overlay, dest)
    for rel, data in (files or {}).items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)
    for rel in deleted:
        (dest / rel).unlink(missing_ok=True)
    if patch and patch.strip():
        apply_patch(dest, patch)
    if tests is not None:
        copy_regular_files(tests, dest)
    return dest


def apply_patch(dest: Path, patch: str) -> None:
    """`git apply` the unified diff `patch` (its exact bytes) to the tree at
    `dest`, or raise `PatchError` with git's reason, the tree left as it was
    (git applies all or nothing, and refuses paths outside `dest`)."""
    done = subprocess.run(["git", "apply", "--whitespace=nowarn", "-"], input=patch.encode(), cwd=dest,
                          capture_output=True, check=False)  # fmt: skip
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip()[-500:] or f"git apply exited {done.returncode}"
        raise PatchError(f"the patch does not apply: {why}")
