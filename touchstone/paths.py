"""Where Touchstone keeps data and caches. One place, so every stage agrees.

`TOUCHSTONE_HOME` is the data root. It may be an object-store URL
(`s3://bucket/prefix`, `gs://...`, any fsspec protocol): then it is used as
given, never turned into a local path, and local state (the DuckDB file, a
default Dagster home) goes to `TOUCHSTONE_LOCAL_HOME` (default ./.touchstone)."""

from __future__ import annotations

import os
from pathlib import Path

_DEFAULT_HOME = ".touchstone"


class Asset:
    """The assets, named once: each is a Dagster asset key (`assets/`,
    `orchestration/`), and a round's asset also names the directory of its data
    under the data root (ROOT/<asset>/ for the shared sources,
    ROOT/rounds/<round>/<asset>/ for the round's stages). Plain strings: one
    goes wherever a name or a path part does."""

    SEED_SOURCES = "seed_sources"
    BASE_MODEL = "base_model"
    HELDOUT_TASKS = "heldout_tasks"
    BASE_EVALUATION = "base_evaluation"  # the base model on the held-out tasks: where the rounds start
    PROPOSED_TASKS = "proposed_tasks"
    RAW_TRAJECTORIES = "raw_trajectories"
    VERIFICATION_REPORTS = "verification_reports"
    TRAINING_DATA = "training_data"
    CHECKPOINT = "checkpoint"
    ROUND_EVALUATION = "round_evaluation"
    # expert iteration's control arm for a round (assets/control.py), outside the round job
    CONTROL_EVALUATION = "control_evaluation"
    # the filter-ablation experiment (docs/EXPERIMENTS.md), which keeps its own files
    ABLATION_SETUP = "ablation_setup"
    ABLATION_ROUND = "ablation_round"
    # the credit-assignment study (docs/EXPERIMENTS.md), likewise
    CREDIT_STUDY_DATA = "credit_study_data"
    CREDIT_STUDY_ARM = "credit_study_arm"


# Not an asset: base_model's own verified training rows (the warm start's, training/warm_start.py),
# ROOT/warm_start/, which rounds replay with theirs (touchstone.data.replay).
WARM_START_DATA = "warm_start"


def is_url(location: str | os.PathLike[str]) -> bool:
    """An object-store (fsspec) URL rather than a local path; `file://` counts as local."""
    text = str(location)
    return "://" in text and not text.startswith("file://")


def data_root() -> str:
    """Where asset data lives: TOUCHSTONE_HOME as given when it is a URL, else `home()`."""
    value = os.environ.get("TOUCHSTONE_HOME", _DEFAULT_HOME)
    return value if is_url(value) else str(home())


def home() -> Path:
    """Local data and state: rounds, DuckDB file, Dagster home. `TOUCHSTONE_HOME`
    (default ./.touchstone); when that is a URL, `TOUCHSTONE_LOCAL_HOME`."""
    value = os.environ.get("TOUCHSTONE_HOME", _DEFAULT_HOME)
    if is_url(value):
        value = os.environ.get("TOUCHSTONE_LOCAL_HOME", _DEFAULT_HOME)
    return Path(value).resolve()


def cache() -> Path:
    """Build caches (sandbox root filesystems). `TOUCHSTONE_CACHE`, default ~/.cache/touchstone."""
    default = Path.home() / ".cache" / "touchstone"
    return Path(os.environ.get("TOUCHSTONE_CACHE", default)).resolve()
