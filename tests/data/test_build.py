"""Dataset builders on hand-built rounds: what goes in, what is dropped, and
that lineage survives every builder."""

from __future__ import annotations

import json

import datasets
import duckdb
import polars as pl
import pytest
from click.testing import CliRunner

from tests.data.fixtures import trajectory, write_round
from tests.data.reports import report
from cli import main
from touchstone.data.build import build_datasets, row_author
from touchstone.data.inputs import DataError
from touchstone.data.schema import DataConfig, DPORow, Lineage, SFTRow, read_rows
from touchstone.verify.batch import REPORTS_FILE, write_reports
from touchstone.verify.report import CheckResult, VerificationReport

FIX = [("read_file", {"path": "calc.py"}), ("str_replace", {"path": "calc.py", "old": "-", "new": "+"}), ("submit", {})]
DETOUR = [("bash", {"command": "ls"}), ("read_file", {"path": "x.py"})] + FIX


@pytest.fixture
def round_files(tmp_path):
    """Task a: two accepted (one with detours), one rejected, one hack, one
    limit-hitting accepted. Task b: all rejected (no RL signal). Task c: inconclusive."""
    trajs = [
        trajectory("a-ok", calls=FIX),
        trajectory("a-detour", calls=DETOUR),
        trajectory("a-bad"),
        trajectory("a-hack", calls=[("write_file", {"path": "tests/test_calc.py", "content": "pass"}), ("submit", {})]),
        trajectory("a-limit", exit_reason="max_turns"),
        trajectory("b-1", task_id="task-b", task_hash="h-b"),
        trajectory("b-2", task_id="task-b", task_hash="h-b", token_ids=False, policy="teacher"),
        trajectory("c-1", task_id="task-c", task_hash="h-c"),
    ]
    reps = [
        report("a-ok", "accept", {1: 1.0}),
        report("a-detour", "accept", {3: 1.0}),
        report("a-bad", "reject", {1: 0.5}),
        report("a-hack", "reject", {0: 1.0}, hack=True),
        report("a-limit", "accept", {1: 1.0}),
        report("b-1", "reject", task_id="task-b", task_hash="h-b"),
        report("b-2", "reject", task_id="task-b", task_hash="h-b"),
        report("c-1", "inconclusive", task_id="task-c", task_hash="h-c"),
    ]
    return write_round(tmp_path, trajs, reps), {r.trajectory_id: r for r in reps}


def test_sft_keeps_only_accepted_submitted_runs(round_files, tmp_path):
    (reports, trajs), _ = round_files
    summary = build_datasets(reports, trajs, tmp_path / "out", round_key="r1")
    sft = pl.read_parquet(tmp_path / "out" / "sft.parquet")
    assert sorted(sft["trajectory_id"]) == ["a-detour", "a-ok"]
    assert summary.datasets["sft"].dropped["hit_limit"] == 1
    assert summary.datasets["sft"].dropped["verdict_reject"] == 4
    # What TRL and `datasets` users get: conversational rows, no decoding on their side.
    rows = datasets.load_dataset("parquet", data_files=str(tmp_path / "out" / "sft.parquet"), split="train")
    row = next(r for r in rows if r["trajectory_id"] == "a-detour")
    messages = row["messages"]
    call = messages[2]["tool_calls"][0]["function"]
    assert call == {"name": "bash", "arguments": {"command": "ls"}}  # TRL format: arguments as an object
    weights = row["turn_weights"]
    assert len(weights) == row["n_turns"] == 5 and sum(weights) / 5 == pytest.approx(1.0)
    assert weights[3] == max(weights) and weights[0] < weights[3]  # the fix outweighs the detour


def test_lineage_survives_every_builder(round_files, tmp_path):
    (reports, trajs), by_id = round_files
    build_datasets(reports, trajs, tmp_path / "out", round_key="r1")
    for name in ("sft", "rl", "dpo", "kto"):
        df = pl.read_parquet(tmp_path / "out" / f"{name}.parquet")
        assert df.height > 0, name
        for row in df.iter_rows(named=True):
            rep = by_id[row["trajectory_id"]]
            assert (row["task_id"], row["task_hash"], row["report_id"]) == (rep.task_id, rep.task_hash, rep.report_id)
            assert row["round"] == "r1" and row["verifier_version"] == rep.verifier_version
            assert row["policy"] and set(Lineage.model_fields) <= set(row)


def test_rl_drops_no_signal_groups_and_keeps_token_ids(round_files, tmp_path):
    (reports, trajs), _ = round_files
    summary = build_datasets(reports, trajs, tmp_path / "out")
    rl = pl.read_parquet(tmp_path / "out" / "rl.parquet")
    assert set(rl["task_id"]) == {"task-a"}  # task-b: all rejected; task-c: inconclusive
    assert summary.datasets["rl"].dropped == {"no_signal_group": 2, "verdict_inconclusive": 1}
    rewards = dict(zip(rl["trajectory_id"], rl["reward"]))
    assert rewards == {"a-ok": 1.0, "a-detour": 1.0, "a-bad": 0.0, "a-hack": -1.0, "a-limit": 1.0}
    row = rl.filter(pl.col("trajectory_id") == "a-ok").row(0, named=True)
    assert row["has_token_ids"] and json.loads(row["turns"])[1]["completion_ids"] == [7] * 12
    assert row["group_advantage"] == pytest.approx(1.0 - 2.0 / 5)
    assert len(row["turn_advantages"]) == 3


def test_preference_pairs_and_kto_labels(round_files, tmp_path):
    (reports, trajs), _ = round_files
    build_datasets(reports, trajs, tmp_path / "out")
    dpo = pl.read_parquet(tmp_path / "out" / "dpo.parquet")
    assert dpo["rejected_trajectory_id"].to_list() == ["a-hack", "a-bad"]  # hacks first
    assert set(dpo["trajectory_id"]) <= {"a-ok", "a-detour", "a-limit"}
    first = read_rows(tmp_path / "out" / "dpo.parquet", DPORow)[0]
    assert first["prompt"][-1]["role"] == "user"
    assert first["chosen"][0]["role"] == "assistant" and first["rejected_hack"]
    assert first["rejected"][0]["tool_calls"][0]["function"]["arguments"] == {
        "path": "tests/test_calc.py",
        "content": "pass",
    }  # the hack, arguments as an object
    kto = pl.read_parquet(tmp_path / "out" / "kto.parquet")
    labels = dict(zip(kto["trajectory_id"], kto["label"]))
    assert labels["a-ok"] is True and labels["a-hack"] is False and "c-1" not in labels


def test_outputs_are_duckdb_and_datasets_readable(round_files, tmp_path):
    (reports, trajs), _ = round_files
    build_datasets(reports, trajs, tmp_path / "out")
    n = duckdb.sql(
        f"select count(*) from '{tmp_path / 'out' / 'sft.parquet'}' where list_sum(turn_weights) > 0"
    ).fetchall()[0][0]
    assert n == 2
    ds = datasets.load_dataset("parquet", data_files=str(tmp_path / "out" / "kto.parquet"), split="train")
    assert ds.num_rows == 7 and isinstance(ds[0]["label"], bool)


def test_dedup_keep_k_over_length_and_malformed(tmp_path):
    trajs = [
        trajectory("x1", calls=FIX),
        trajectory("x2", calls=FIX),
        trajectory("x3", calls=DETOUR),
        trajectory("x4", calls=FIX, raw_args="{not json"),
        trajectory("x5", calls=DETOUR * 3),
    ]
    trajs[1] = trajs[1].model_copy(update={"turns": [], "tools": []})  # same actions as x1, no ids -> duplicate
    reps = [report(t.trajectory_id, "accept") for t in trajs]
    files = write_round(tmp_path, trajs, reps)
    summary = build_datasets(*files, tmp_path / "out", config=DataConfig(keep_per_task=1, max_tokens=150))
    sft = pl.read_parquet(tmp_path / "out" / "sft.parquet")
    assert sft["trajectory_id"].to_list() == ["x1"]
    assert summary.datasets["sft"].dropped == {"duplicate": 1, "beyond_keep_per_task": 2, "over_length": 1}


def test_a_malformed_call_is_context_never_a_label(tmp_path):
    """An accepted run with a malformed call (a learner's turn the teacher corrected)
    keeps it as the model wrote it, with weight 0; its other turns train as usual."""
    run = trajectory("x1", calls=[("read_file", {"path": "calc.py"}), *FIX], raw_args='{"path": calc.py')
    files = write_round(tmp_path, [run], [report("x1", "accept")])
    build_datasets(*files, tmp_path / "out")
    [row] = read_rows(tmp_path / "out" / "sft.parquet", SFTRow)
    assert row["turn_weights"][0] == 0.0 and all(w > 0 for w in row["turn_weights"][1:])
    assert row["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"path": calc.py'


def test_run_that_failed_before_its_first_turn(tmp_path):
    dead = trajectory("dead", exit_reason="policy_error")
    dead = dead.model_copy(update={"messages": dead.messages[:2], "turns": []})
    files = write_round(tmp_path, [dead, trajectory("ok")], [report("dead", "reject"), report("ok", "accept")])
    summary = build_datasets(*files, tmp_path / "out")
    assert summary.datasets["kto"].dropped == {"no_turns": 1} and summary.datasets["rl"].rows == 2
    assert pl.read_parquet(tmp_path / "out" / "rl.parquet").filter(pl.col("trajectory_id") == "dead")[
        "turn_advantages"
    ].to_list() == [[]]


def test_mismatched_inputs_are_clear_errors(tmp_path):
    files = write_round(tmp_path, [trajectory("x1")], [report("zz", "accept")])
    with pytest.raises(DataError, match="trajectory zz not found"):
        build_datasets(*files, tmp_path / "out")
    files = write_round(tmp_path, [trajectory("x1")], [report("x1", "accept", task_hash="other")])
    with pytest.raises(DataError, match="task task-a@other"):
        build_datasets(*files, tmp_path / "out")
    bad = write_reports([report("x1", "reject")], tmp_path / "t") / REPORTS_FILE
    pl.read_parquet(bad).with_columns(verdict=pl.lit("accept")).write_parquet(bad)
    with pytest.raises(DataError, match="says 'accept' but its checks give 'reject'"):
        build_datasets(bad, files[1], tmp_path / "out")


def test_cli_build_prints_summary(round_files, tmp_path):
    (reports, trajs), _ = round_files
    result = CliRunner().invoke(
        main,
        [
            "data",
            "build",
            "--reports",
            str(reports),
            "--trajectories",
            str(trajs),
            "--out",
            str(tmp_path / "out"),
            "--round",
            "r1",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "sft" in result.output and "tests" in result.output  # reject reason: the failed check
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["datasets"]["sft"]["rows"] == 2
    again = CliRunner().invoke(main, ["data", "summary", str(tmp_path / "out")])
    assert again.exit_code == 0 and again.output == result.output


def test_runs_without_isolation_or_oracle_are_left_out_and_counted(tmp_path):
    """Task u ran its tests with candidate code in the judging process and has
    no oracle: its runs are not training data by default, and the summary says
    how many were left out; task i ran isolated and is kept, and so is task s,
    whose tests that show the fix ran isolated (split)."""
    trajs = [
        trajectory("u-ok", task_id="task-u", task_hash="h-u", calls=FIX),
        trajectory("u-bad", task_id="task-u", task_hash="h-u"),
        trajectory("i-ok", task_id="task-i", task_hash="h-i", calls=FIX),
        trajectory("s-ok", task_id="task-s", task_hash="h-s", calls=FIX),
    ]
    reps = [
        report("u-ok", "accept", task_id="task-u", task_hash="h-u", isolation="not_isolated"),
        report("u-bad", "reject", task_id="task-u", task_hash="h-u", isolation="not_isolated"),
        report("i-ok", "accept", task_id="task-i", task_hash="h-i", isolation="isolated"),
        report("s-ok", "accept", task_id="task-s", task_hash="h-s", isolation="split"),
    ]
    assert [r.guard for r in reps] == ["in_process", "in_process", "isolation", "split_isolation"]
    reports, traj_file = write_round(tmp_path, trajs, reps)
    summary = build_datasets(reports, traj_file, tmp_path / "out", round_key="r1")
    assert pl.read_parquet(tmp_path / "out" / "sft.parquet")["trajectory_id"].sort().to_list() == ["i-ok", "s-ok"]
    assert pl.read_parquet(tmp_path / "out" / "kto.parquet").filter(pl.col("task_id") == "task-u").height == 0
    assert summary.excluded_unguarded == 2
    assert summary.guards == {"in_process": 2, "isolation": 1, "split_isolation": 1}
    assert summary.datasets["sft"].dropped["unguarded"] == 1  # the accepted one, so SFT still reconciles
    kept = build_datasets(reports, traj_file, tmp_path / "all", config=DataConfig(include_unguarded=True))
    oracle = [
        CheckResult(name="tests", status="pass"),
        CheckResult(name="oracle", status="pass", counts={"replayed": 0}),
    ]

    def guard(isolation: str = "not_isolated") -> str | None:
        return VerificationReport(trajectory_id="t", task_id="u", task_hash="h", checks=oracle,
                                  isolation=isolation).guard  # fmt: skip

    assert guard() == "in_process" and guard("isolated") == "isolation"  # an oracle that replayed nothing
    oracle[1].counts.update(replayed=12, unreplayable=0, tests_uncovered=1, unobserved=0)
    assert guard() == "in_process"  # one replayed call is not enough: a required test had none compared
    assert guard("isolated") == "isolation"  # isolated or not: coverage of what the tests assert on
    oracle[1].counts["tests_uncovered"] = 0
    assert guard() == "oracle" and guard("isolated") == "isolation+oracle"
    oracle[1].counts["unobserved"] = 1
    assert guard() == "in_process"  # a test read captured output or files no replayed call returns
    oracle[1].counts["unobserved"] = 0
    oracle[1].counts["unreplayable"] = 3
    assert guard() == "in_process"  # calls the oracle could not replay: the tests saw more than it did
    assert kept.excluded_unguarded == 0 and kept.datasets["sft"].rows == 3


def test_cli_json_summary_and_config_errors_name_the_key(round_files, tmp_path):
    (reports, trajs), _ = round_files
    args = ["data", "build", "--reports", str(reports), "--trajectories", str(trajs), "--out", str(tmp_path / "o")]
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["datasets"]["sft"]["rows"] == 2
    bad = tmp_path / "data.yaml"
    bad.write_text("keep_per_tsk: 2\ncredit:\n  gamma: fast\n")
    result = CliRunner().invoke(main, [*args, "--config", str(bad)])
    assert result.exit_code != 0
    (line,) = [ln for ln in result.output.splitlines() if ln.startswith("Error")]
    assert "credit.gamma: Input should be a valid number" in line and "keep_per_tsk: unknown key" in line


def test_the_summary_says_who_wrote_the_training_rows(tmp_path):
    """Expert iteration trains on the model's own runs; teacher rows are an option that a
    report must show: each accepted row is counted by its author."""
    authors = {"own-1": "hf:/ckpt", "own-2": "openai:http://vllm:8000/v1#abc", "teach": "teacher"}
    authors["fixed"] = "corrected:hf:/ckpt"
    runs = [trajectory(t, task_id=f"task-{t}", task_hash=f"h-{t}", policy=p) for t, p in authors.items()]
    verdicts = [report(t, "accept", task_id=f"task-{t}", task_hash=f"h-{t}") for t in authors]
    reports, trajs = write_round(tmp_path, runs, verdicts)
    sft = build_datasets(reports, trajs, tmp_path / "out").datasets["sft"]
    assert sft.authors == {"model": 2, "teacher": 1, "teacher-corrected": 1}
    assert sft.own_share == 0.5
    assert row_author("replay:/x.json") == "other"
