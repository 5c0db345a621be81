"""Workspace trees for grading: the diff between two sandbox snapshots, and
the tree that is graded (pristine workspace + the candidate's changed files +
pristine tests on top). Symlinks and special files are a change like any
other; they are refused by the protected-paths check (a link could point at
harness files), and never copied."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

# Interpreter caches are never graded: a hash-based .pyc planted next to the
# source would be imported instead of it.
_CACHE_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}


def is_cache(rel: str) -> bool:
    parts = rel.split("/")
    return any(p in _CACHE_DIRS for p in parts[:-1]) or rel.endswith((".pyc", ".pyo"))


def _kind(digest: str) -> str:
    """Sandbox snapshot values: sha256, `link:...` or `special:...`."""
    return "l" if digest.startswith("link:") else "o" if digest.startswith("special:") else "f"


@dataclass
class TreeDiff:
    created: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    kinds: dict[str, str] = field(default_factory=dict)  # rel -> f/l/o in the final tree

    @property
    def changed(self) -> list[str]:
        return sorted(self.created + self.modified + self.deleted)

    def summary(self) -> str:
        return f"{len(self.created)} created, {len(self.modified)} modified, {len(self.deleted)} deleted"


def diff_snapshots(before: dict[str, str], after: dict[str, str]) -> TreeDiff:
    """Changes between two `Sandbox.snapshot()`s, interpreter caches left out."""
    d = TreeDiff()
    for rel in sorted(set(before) | set(after)):
        if is_cache(rel):
            continue
        if rel not in before:
            d.created.append(rel)
        elif rel not in after:
            d.deleted.append(rel)
        elif before[rel] != after[rel]:
            d.modified.append(rel)
        else:
            continue
        if rel in after:
            d.kinds[rel] = _kind(after[rel])
    return d


def copy_tree(src: Path, dest: Path) -> None:
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


def assemble(pristine: Path, files: dict[str, bytes], deleted: list[str], overlays: list[Path], dest: Path) -> None:
    """dest = pristine + `files` (the candidate's changed regular files) -
    `deleted`, then each overlay (pristine visible and hidden tests) on top."""
    copy_tree(pristine, dest)
    for rel, data in files.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    for rel in deleted:
        (dest / rel).unlink(missing_ok=True)
    for overlay in overlays:
        copy_tree(overlay, dest)
