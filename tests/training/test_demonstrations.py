"""Reference demonstrations of level-1 tasks (training.demonstrations.demonstrate_fixes): the
warm start's labelled data, run in the real sandbox and graded by the real verifier like any
policy's runs, written in the text tool protocol a model is parsed in."""

from __future__ import annotations

import json

import polars as pl

from tests.agent.conftest import MINILIB, minilib_task
from touchstone.agent.loop import EpisodeLimits
from touchstone.data.build import build_datasets
from touchstone.taskmaking.curriculum import show_function
from touchstone.tasks.schema import load_task
from touchstone.verify import verify_batch
from training.demonstrations import demonstrate_fixes


def _mutation_task(root):
    task = minilib_task(
        root / "raw", "clamp-flip", "`clamp` ignores the upper bound.", MINILIB.replace("if x > hi:", "if x <= hi:")
    )
    (task.dir / "reference" / "minilib").mkdir(parents=True)
    (task.dir / "reference" / "minilib" / "core.py").write_text(MINILIB)
    data = json.loads((task.dir / "task.json").read_text())
    data["source"] = {"proposer": "mutation", "unit": "minilib:minilib.core:clamp", "meta": {"path": "minilib/core.py"}}
    data["entry_points"] = [{"module": "minilib.core", "function": "clamp"}]
    (task.dir / "task.json").write_text(json.dumps(data))
    return show_function(load_task(task.dir), root / "shown")


def test_demonstrations_are_verified_runs_labelled_as_nobody_s_own(tmp_path):
    _mutation_task(tmp_path)
    tasks = tmp_path / "shown"
    runs = demonstrate_fixes(tasks, tmp_path / "demo", backend="bwrap", limits=EpisodeLimits(max_turns=3))
    table = pl.read_parquet(runs / "trajectories.parquet")
    assert table["policy"].to_list() == ["replay:reference-fix"] and table["exit_reason"].to_list() == ["submitted"]
    verify_batch(tasks, runs, out=tmp_path / "verify", backend="bwrap")
    summary = build_datasets(tmp_path / "verify" / "reports.parquet", runs / "trajectories.parquet", tmp_path / "data")
    assert summary.verdicts == {"accept": 1}
    assert summary.datasets["sft"].authors == {"other": 1} and summary.datasets["sft"].own_share == 0.0
    replies = [m["content"] for m in json.loads(table["messages"][0]) if m["role"] == "assistant"]
    assert replies[0].startswith('<tool_call>[{"name": "str_replace"') and '"submit"' in replies[1]
