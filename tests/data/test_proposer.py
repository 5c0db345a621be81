"""The proposer's rewards from verified outcomes, its RL rows and DPO pairs next
to the solver's, the blocking check on them, and the round report's section."""

from __future__ import annotations

import json

import polars as pl
import pytest

from orchestration.checks import verified_rows_problems
from tests.data.fixtures import POLICY, trajectory, write_round, write_selfplay_round
from tests.data.reports import report
from touchstone.data.build import build_datasets
from touchstone.data.inputs import join, read_trajectories, reports_of
from touchstone.data.proposer import proposer_rewards, proposer_row_problems
from touchstone.data.schema import DataConfig, DPORow, ProposerConfig, RLRow, read_rows


@pytest.fixture
def selfplay_round(tmp_path):
    return write_selfplay_round(tmp_path)


def test_rewards_come_from_verified_outcomes(selfplay_round):
    tasks, reports_file, traj_file = selfplay_round
    from touchstone.taskmaking.index import read_index
    from touchstone.taskmaking.proposers.selfplay import read_proposals

    examples = join(read_trajectories(traj_file), reports_of(reports_file), "r001")
    rewards = {r.proposal_id: r for r in proposer_rewards(read_proposals(tasks), read_index(tasks), examples,
                                                          ProposerConfig(invalid_penalty=-0.25))}  # fmt: skip
    got = {pid: (r.outcome, r.attempts, r.solve_rate, r.reward) for pid, r in rewards.items()}
    assert got == {
        "p-learn": ("learnable", 4, 0.5, 0.5),
        "p-bad": ("invalid", 0, None, -0.25),
        "p-trivial": ("trivial", 2, 1.0, 0.0),
        "p-copy": ("invalid", 0, None, -0.25),
        "p-untried": ("unattempted", 0, None, None),
        "p-teacher": ("learnable", 2, 0.5, 0.5),
        "p-revoked": ("invalid", 0, None, -0.25),
    }
    assert rewards["p-teacher"].solvers == ["teacher"] and rewards["p-learn"].solvers == [POLICY, "hf:/copy"]
    assert len(rewards["p-learn"].report_ids) == 4
    # group baseline: the mean reward of the round's rewarded proposals of the kind
    mean = (0.5 - 0.25 + 0 - 0.25 + 0.5 - 0.25) / 6
    assert rewards["p-learn"].advantage == pytest.approx(0.5 - mean)
    assert rewards["p-untried"].advantage is None


def test_proposer_rows_sit_next_to_the_solver_rows_with_lineage(selfplay_round, tmp_path):
    tasks, reports_file, traj_file = selfplay_round
    out = tmp_path / "data"
    summary = build_datasets(reports_file, traj_file, out, round_key="r001", config=DataConfig(), proposals=tasks)
    rl = read_rows(out / "rl.parquet", RLRow)
    roles = {r["trajectory_id"]: r["role"] for r in rl}
    assert roles["a-ok"] == roles["a-bad"] == "solver"
    proposer = {r["trajectory_id"]: r for r in rl if r["role"] == "proposer"}
    # contaminated: no row (its text is a held-out problem's); unattempted: no signal
    assert set(proposer) == {"p-learn", "p-bad", "p-trivial", "p-teacher", "p-revoked"}
    learn = proposer["p-learn"]
    assert (learn["task_id"], learn["policy"], learn["checkpoint_hash"], learn["round"]) == (
        "p-learn", POLICY, "ck-1", "r001"
    )  # fmt: skip
    reports = pl.read_parquet(reports_file)
    counted = reports.filter(pl.col("trajectory_id").is_in(["l-1", "l-2", "l-3", "l-5"]))["report_id"]
    assert learn["task_hash"] == "hash-p-learn" and sorted(learn["report_id"].split(",")) == sorted(counted)
    assert learn["messages"][-1] == {"role": "assistant", "content": "proposal p-learn", "tool_calls": None,
                                     "tool_call_id": None}  # fmt: skip
    assert learn["has_token_ids"] and json.loads(learn["turns"])[0]["completion_ids"] == [4, 5]
    assert learn["turn_advantages"] == [learn["group_advantage"]] and learn["group_advantage"] > 0
    assert proposer["p-bad"]["reward"] == -0.5 and proposer["p-bad"]["report_id"] == ""
    dpo = [r for r in read_rows(out / "dpo.parquet", DPORow) if r["role"] == "proposer"]
    assert [(r["trajectory_id"], r["rejected_trajectory_id"]) for r in dpo] == [
        ("p-learn", "p-bad"),
        ("p-teacher", "p-revoked"),
    ]
    assert dpo[0]["prompt"][1]["content"] == "group 0" and dpo[0]["rejected"][0]["content"] == "proposal p-bad"
    # the blocking check holds on these rows, and catches a reward the reports do not give
    datasets = {n: pl.read_parquet(out / f"{n}.parquet") for n in ("sft", "rl", "dpo", "kto")}
    sft_dropped = summary.datasets["sft"].dropped
    assert verified_rows_problems(datasets, reports, sft_dropped) == {}
    tampered = datasets["rl"].with_columns(
        pl.when(pl.col("trajectory_id") == "p-bad").then(0.9).otherwise(pl.col("reward")).alias("reward")
    )
    assert verified_rows_problems({**datasets, "rl": tampered}, reports, sft_dropped) == {
        "proposer_rl_reward_mismatch": ["p-bad"]
    }
    verdicts = {r: (t, v) for r, t, v in zip(reports["report_id"], reports["task_id"], reports["verdict"])}
    of_task_a = reports.filter(pl.col("trajectory_id") == "a-ok")["report_id"][0]
    forged = [{**learn, "report_id": f"{learn['report_id']},{of_task_a}"}]
    assert "proposer_rl_unverified" in proposer_row_problems(forged, [], verdicts)


def test_round_report_section(selfplay_round, tmp_path):
    tasks, reports_file, traj_file = selfplay_round
    out = tmp_path / "data"
    summary = build_datasets(reports_file, traj_file, out, round_key="r001", proposals=tasks)
    sp = summary.self_play
    assert (sp.proposals, sp.valid, sp.contamination_hits) == (7, 4, 1)
    assert sp.valid_share == pytest.approx(4 / 7)
    assert sp.rejection_reasons == {"malformed": 1, "contaminated": 1, "reference_fails_in_grading": 1}
    assert sp.outcomes == {"invalid": 3, "learnable": 2, "trivial": 1, "unattempted": 1}
    assert sp.learnability == {"min": 0.0, "median": 0.5, "mean": pytest.approx(1 / 3), "max": 0.5}
    assert sp.solve_rate["procedural"] == 0.5 and sp.attempts["self"] == 9
    assert sp.solve_rate["self"] == pytest.approx(6 / 9)
    assert (sp.distinct_entry_points, sp.distinct_ast_shapes) == (4, 3)
    md = (out / "selfplay.md").read_text()
    assert "4 of 7 self-proposals were valid" in md and "contamination hits" in md
    assert json.loads((out / "summary.json").read_text())["self_play"]["valid"] == 4
    rewards = pl.read_parquet(out / "proposer_rewards.parquet")
    assert rewards.height == 7 and set(rewards["outcome"]) >= {"learnable", "invalid", "unattempted"}


def test_no_proposals_no_section(tmp_path):
    reports_file, traj_file = write_round(tmp_path, [trajectory("x")], [report("x", "accept")])
    (tmp_path / "tasks").mkdir()
    summary = build_datasets(reports_file, traj_file, tmp_path / "d", proposals=tmp_path / "tasks")
    assert summary.self_play is None and not (tmp_path / "d" / "selfplay.md").exists()


def test_cli_build_takes_the_proposals(selfplay_round, tmp_path):
    from click.testing import CliRunner

    from cli import main

    tasks, reports_file, traj_file = selfplay_round
    args = ["data", "build", "--reports", str(reports_file), "--trajectories", str(traj_file)]
    result = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "d"), "--proposals", str(tasks), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["self_play"]["proposals"] == 7
