"""The one content hash of a file tree: sha256 over (relative path, sha256 of
the bytes) of every regular file, in sorted order. The sandbox image
definition, checkpoints and datasets are all identified by it; each caller
says which files are not part of the identity (docs, manifests, logs)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path


def tree_hash(root: Path, skip: Callable[[str], bool] = lambda rel: False) -> str:
    """Hash of `root` (a directory, or one file hashed under its name); `skip`
    gets each file's relative POSIX path."""
    digest = hashlib.sha256()
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for file in files:
        rel = file.relative_to(root).as_posix() if root.is_dir() else file.name
        if skip(rel):
            continue
        digest.update(rel.encode() + b"\0")
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()
