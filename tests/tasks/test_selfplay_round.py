"""A round with `self` enabled, end to end on recorded model outputs: sources by
quota, self-proposals (standalone and bug) screened and validated, every task
solved by real policies (the teacher and a replayed model), verified by the
verifier, and the proposer's rewards and rows built from those verdicts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from orchestration.checks import verified_rows_problems
from tests.tasks.test_selfplay import BY_LABEL, TOTAL, bug, heldout_set, proposal, replay, tot_seed
from touchstone.agent.policies.spec import TEACHER, PolicySpec
from touchstone.agent.loop import EpisodeLimits
from touchstone.agent.rollout import merge_rollouts, solve
from touchstone.data.build import build_datasets
from touchstone.data.schema import DPORow, RLRow, read_rows
from touchstone.taskmaking.index import read_index
from touchstone.taskmaking.proposers.llm import learnability_reward
from touchstone.taskmaking.proposers.selfplay import SelfPlayConfig, read_proposals
from touchstone.tasks.schema import load_task_set
from touchstone.taskmaking.sources import SourceMix, propose_round
from touchstone.taskmaking.validate import ValidationConfig
from touchstone.verify import verify_batch

EVENS = proposal(
    "Implement evens(xs): return the even integers of the list xs, in their original order.",
    "evens",
    "def evens(xs):\n    return [x for x in xs if x % 2 == 0]\n",
    "from solution import evens\n\n\ndef test_evens():\n    assert evens([]) == []\n    assert evens([1, 2, 4]) == [2, 4]\n"
    "    assert evens([3, 5]) == []\n    assert evens([-2, 7, 0]) == [-2, 0]\n",
)
OUTPUTS = [
    EVENS,  # group 0, standalone
    BY_LABEL["malformed_json"],
    bug(TOTAL.replace("for x in xs:", "for x in xs[1:]:")),  # group 1, bug: drops the first item
    "Sure! Here is a bug: change the loop.",
    BY_LABEL["duplicate"],  # group 2, standalone: the held-out rle task, renamed
    BY_LABEL["trivially_easy"],
]


@pytest.mark.slow
def test_a_round_with_self_proposal_on_recorded_outputs(tmp_path: Path) -> None:
    heldout = heldout_set(tmp_path / "heldout")
    proposer = replay(tmp_path, OUTPUTS, "proposer.json")
    out = tmp_path / "proposed_tasks"
    mix = SourceMix(procedural=1, self_play=SelfPlayConfig(n=6, group_size=2, kinds=["standalone", "bug"]))
    validation = ValidationConfig(backend="bwrap", contamination_sets=[heldout])
    sources = propose_round(
        out,
        mix,
        seeds=[str(tot_seed(tmp_path / "tot-project"))],
        heldout=heldout,
        policy=proposer,
        validation=validation,
        rng_seed=0,
        round_key="r000",
    )
    records = {r.proposal_id: r for r in read_proposals(out)}
    outcomes = [(r.kind, r.reason or r.status) for r in records.values()]
    assert outcomes == [("standalone", "kept"), ("standalone", "malformed"), ("bug", "kept"), ("bug", "malformed"),
                        ("standalone", "contaminated"), ("standalone", "already_solved")]  # fmt: skip
    assert sources.outcomes["procedural"].kept == 1 and sources.outcomes["self"].kept == 2
    tasks = load_task_set(out)
    assert len(tasks) == 3
    mine = [t for t in tasks if "proposal" in t.source.meta]
    assert [t.source.meta["proposal"] for t in mine] == [
        {"policy": str(proposer.spec), "checkpoint_hash": None, "kind": kind, "round": "r000"}
        for kind in ("standalone", "bug")
    ]
    index = {r.id: r for r in read_index(out)}
    assert all(index[t.id].policy == str(proposer.spec) for t in mine)

    # the round's solvers: the scripted teacher and a replayed model that never acts
    solver = tmp_path / "solver.json"
    solver.write_text(json.dumps(["I cannot solve this task."]))
    limits = EpisodeLimits(max_turns=16, time_budget_s=300)
    parts = [
        solve(tasks, spec, attempts=1, workers=2, out=tmp_path / "work" / name, backend="bwrap", limits=limits,
              progress=False)
        for name, spec in (("teacher", TEACHER), ("replay", PolicySpec("replay", str(solver))))
    ]  # fmt: skip
    rollouts = tmp_path / "rollouts"
    rollouts.mkdir()
    for part in parts:
        shutil.copytree(part, rollouts / part.name)
    merge_rollouts(parts, rollouts)
    verified = verify_batch(out, rollouts, workers=2, out=tmp_path / "verify", replays=1, backend="bwrap")
    reports = pl.read_parquet(verified / "reports.parquet")

    data = tmp_path / "training_data"
    summary = build_datasets(verified / "reports.parquet", rollouts / "trajectories.parquet", data,
                             round_key="r000", proposals=out)  # fmt: skip
    rewards = {r["proposal_id"]: r for r in pl.read_parquet(data / "proposer_rewards.parquet").to_dicts()}
    for pid, record in records.items():
        r = rewards[pid]
        if record.status != "kept":
            assert (r["outcome"], r["reward"]) == ("invalid", -0.5)
            continue
        mine = reports.filter((pl.col("task_id") == pid) & (pl.col("verdict") != "inconclusive"))
        assert r["attempts"] == mine.height == 2  # the proposer solved nothing itself: every policy's runs count
        rate = (mine["verdict"] == "accept").mean()
        assert r["solve_rate"] == rate and r["reward"] == learnability_reward(rate)
    sp = summary.self_play
    assert (sp.proposals, sp.valid, sp.contamination_hits) == (6, 2, 1)
    assert sp.attempts["self"] == 4 and sp.attempts["procedural"] == 2
    assert sp.distinct_entry_points == 2
    proposer_rows = [r for r in read_rows(data / "rl.parquet", RLRow) if r["role"] == "proposer"]
    assert proposer_rows and {r["policy"] for r in proposer_rows} == {str(proposer.spec)}
    assert all(r["task_id"] in records for r in proposer_rows)
    assert not any(rewards[r["task_id"]]["reason"] == "contaminated" for r in proposer_rows)
    # every learnable proposal (here: the bug, which the teacher fixes and the replayed model does not)
    # is preferred over the invalid answer to the same prompt
    learnable = sorted(pid for pid, r in rewards.items() if r["outcome"] == "learnable")
    pairs = [r for r in read_rows(data / "dpo.parquet", DPORow) if r["role"] == "proposer"]
    assert sorted(r["trajectory_id"] for r in pairs) == learnable
    assert all(records[r["rejected_trajectory_id"]].status == "rejected" for r in pairs)
    datasets = {n: pl.read_parquet(data / f"{n}.parquet") for n in ("sft", "rl", "dpo", "kto")}
    assert verified_rows_problems(datasets, reports, summary.datasets["sft"].dropped) == {}
    assert "2 of 6 self-proposals were valid" in (data / "selfplay.md").read_text()
