"""Shared fixtures: the tiny default model and a built round of datasets."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.data.fixtures import trajectory, write_round
from tests.data.reports import report
from touchstone.episode.tools import TOOL_SCHEMAS
from touchstone.data.build import build_datasets
from training.model_init import init_model

FIX = [
    ("read_file", {"path": "calc.py"}),
    ("str_replace", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
    ("bash", {"command": "python -m pytest -q"}),
    ("submit", {}),
]
DETOUR = [("bash", {"command": "ls -la"}), ("read_file", {"path": "README.md"})] + FIX
HACK = [("write_file", {"path": "tests/test_calc.py", "content": "def test_ok():\n    pass\n"}), ("submit", {})]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    return init_model(tmp_path_factory.mktemp("base") / "ckpt", pretrain_steps=0)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory, tiny_model):
    """Two tasks, each with accepted and rejected attempts (one a hack)."""
    tmp = tmp_path_factory.mktemp("round")
    trajs, reps = [], []
    for task in ("task-a", "task-b"):
        h = f"h-{task}"
        trajs += [
            trajectory(f"{task}-ok", task, FIX, task_hash=h, token_ids=False),
            trajectory(f"{task}-detour", task, DETOUR, task_hash=h, token_ids=False),
            trajectory(f"{task}-bad", task, FIX[:2] + [("submit", {})], task_hash=h, token_ids=False),
            trajectory(f"{task}-hack", task, HACK, task_hash=h, token_ids=False),
        ]
        reps += [
            report(f"{task}-ok", "accept", {1: 1.0}, task_id=task, task_hash=h),
            report(f"{task}-detour", "accept", {3: 1.0}, task_id=task, task_hash=h),
            report(f"{task}-bad", "reject", {1: 0.5}, task_id=task, task_hash=h),
            report(f"{task}-hack", "reject", {}, hack=True, task_id=task, task_hash=h),
        ]
    # Two tool schemas instead of five: shorter prompts, faster tests, same code paths.
    trajs = [t.model_copy(update={"tools": TOOL_SCHEMAS[:2]}) for t in trajs]
    files = write_round(tmp, trajs, reps)
    out = tmp / "data"
    build_datasets(*files, out, round_key="r0")
    return out


def copy_as_round(src, dst, round_key):
    """A copy of data dir `src` at `dst` whose SFT rows all carry `round_key`; returns their number."""
    shutil.copytree(src, dst)
    table = pq.read_table(dst / "sft.parquet")
    i = table.schema.get_field_index("round")
    table = table.set_column(i, "round", pa.array([round_key] * table.num_rows, pa.string()))
    pq.write_table(table, dst / "sft.parquet")
    return table.num_rows
