"""Checkpoint directories: Hugging Face weights + tokenizer, plus a
`checkpoint.json` manifest that ties the weights to their lineage (round,
parent checkpoint, datasets, config) and carries their own content hash.

The content hash covers the files that define the model (weights, config,
tokenizer), not the manifest itself and not the TensorBoard logs, so two
trainings that produce identical weights have the same hash.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import touchstone
from touchstone.hashing import tree_hash

MANIFEST = "checkpoint.json"
# Not part of the model's identity: the manifest (would be circular), logs, and the
# TrainingArguments transformers pickles beside the weights: they hold the output
# directory, so the same weights trained into two data roots hashed differently (the
# settings are in the manifest's config).
_EXCLUDED = {MANIFEST, "training_args.bin"}
_EXCLUDED_DIRS = {"logs", "runs"}


class CheckpointError(ValueError):
    """A checkpoint directory is missing, incomplete, or its files do not match its manifest."""


class CheckpointManifest(BaseModel):
    round: str | None
    parent_hash: str | None
    datasets: dict[str, str]  # dataset name -> content hash
    config: dict[str, Any]
    metrics: dict[str, float]
    project_version: str
    created_at: str
    content_hash: str


def content_hash(path: str | os.PathLike) -> str:
    """The content hash (`touchstone.hashing.tree_hash`) of a checkpoint
    directory or dataset file; manifest and log folders excluded."""
    root = Path(path)
    if not root.exists():
        raise CheckpointError(f"{root}: does not exist, cannot hash it")
    return tree_hash(root, skip=lambda rel: rel in _EXCLUDED or rel.split("/", 1)[0] in _EXCLUDED_DIRS)


def write_manifest(
    ckpt: str | os.PathLike,
    *,
    round_key: str | None,
    parent: str | os.PathLike | None,
    datasets: dict[str, str],
    config: dict[str, Any],
    metrics: dict[str, float],
) -> CheckpointManifest:
    """Write `checkpoint.json` for weights already saved in `ckpt`. `parent`
    is the base checkpoint directory (its hash is read from its manifest, or
    computed if it is a plain Hugging Face directory)."""
    ckpt = Path(ckpt)
    manifest = CheckpointManifest(
        round=round_key,
        parent_hash=None if parent is None else checkpoint_hash(parent),
        datasets=datasets,
        config=config,
        metrics=metrics,
        project_version=touchstone.__version__,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        content_hash=content_hash(ckpt),
    )
    (ckpt / MANIFEST).write_text(manifest.model_dump_json(indent=2) + "\n")
    return manifest


def read_manifest(ckpt: str | os.PathLike) -> CheckpointManifest:
    path = Path(ckpt) / MANIFEST
    if not path.is_file():
        raise CheckpointError(f"{ckpt}: no {MANIFEST}; not a Touchstone checkpoint")
    try:
        return CheckpointManifest.model_validate_json(path.read_text())
    except ValueError as exc:
        raise CheckpointError(f"{path}: invalid manifest: {exc}") from exc


def checkpoint_hash(ckpt: str | os.PathLike) -> str:
    """The content hash of a checkpoint: from its manifest when it has one,
    else computed (any Hugging Face model directory can be a base)."""
    ckpt = Path(ckpt)
    if (ckpt / MANIFEST).is_file():
        return read_manifest(ckpt).content_hash
    return content_hash(ckpt)


def verify_checkpoint(ckpt: str | os.PathLike) -> CheckpointManifest:
    """Raise `CheckpointError` unless the files still match the manifest's hash."""
    manifest = read_manifest(ckpt)
    actual = content_hash(ckpt)
    if actual != manifest.content_hash:
        raise CheckpointError(
            f"{ckpt}: content hash {actual[:12]} does not match manifest {manifest.content_hash[:12]}; files changed"
        )
    return manifest
