"""Held-out tasks never reach training: a round's proposed task that shares a
source unit, id or content hash with a kept held-out task is rejected
(reason `heldout`) and its directory removed, before anything solves it."""

from __future__ import annotations

import shutil
from pathlib import Path

from touchstone.taskmaking.index import read_index, write_index

# The held-out set's proposer seed: its own stream, apart from the rounds' (0, 1, ...).
HELDOUT_RNG_SEED = 1_000_000


def exclude_heldout(task_set: Path, heldout_set: Path) -> int:
    """Reject the kept tasks of `task_set` that overlap `heldout_set`, in its
    index and on disk. Returns how many were excluded."""
    heldout = [r for r in read_index(heldout_set) if r.status == "kept"]
    units = {r.unit for r in heldout}
    ids, hashes = {r.id for r in heldout}, {r.content_hash for r in heldout}
    rows, excluded = [], 0
    for row in read_index(task_set):
        if row.status == "kept" and (row.unit in units or row.id in ids or row.content_hash in hashes):
            shutil.rmtree(task_set / row.id)
            row = row.model_copy(update={"status": "rejected", "reason": "heldout",
                                         "detail": "shares its source unit with a held-out task"})  # fmt: skip
            excluded += 1
        rows.append(row)
    write_index(task_set, rows)
    return excluded
