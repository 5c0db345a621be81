"""The round engine's stages are the ones every caller runs: a run the filter
ablation grades gets the very report a round's verification stage gives it, and
the evaluation stage a round shares with `touchstone eval` refuses figures from
attempts the sandbox broke (real teacher, sandbox and verifier)."""

from __future__ import annotations

import polars as pl
import pytest

from orchestration.resources import SandboxResource, VerifierResource
from tests.agent.conftest import MINILIB, minilib_task
from tests.data.fixtures import trajectory
from touchstone.agent.loop import EpisodeLimits
from touchstone.agent.policies.spec import TEACHER
from touchstone.episode.trajectory import write_tables
from touchstone.experiments.filter_ablation import AblationConfig
from touchstone.verify.batch import read_reports
from training.ablation import filter_outcomes
from training.round_engine import Sandboxes, evaluate, roll_out, verify

BACKEND = "bwrap"


def _report_view(reports) -> list[tuple]:
    return sorted((r.trajectory_id, r.report_id, r.verdict, [(c.name, c.status) for c in r.checks]) for r in reports)


def test_the_filter_ablation_grades_a_run_as_a_rounds_verification_stage_does(tmp_path):
    task = minilib_task(tmp_path / "tasks", "clamp-flip", "`clamp` ignores the upper bound.",
                        MINILIB.replace("if x > hi:", "if x <= hi:"))  # fmt: skip
    sandboxes = Sandboxes(backend=BACKEND, workers=1)
    rollouts = roll_out([task], TEACHER, 1, tmp_path / "rollouts", sandboxes, limits=EpisodeLimits(max_turns=16))

    # the round's verification_reports asset: its resources' settings, one grading run as the ablation's
    sandbox, verifier = SandboxResource(backend=BACKEND, workers=1), VerifierResource(replays=1)
    in_round = verify(tmp_path / "tasks", rollouts, tmp_path / "round", sandbox.sandboxes(), verifier.grading())
    cfg = AblationConfig(backend=BACKEND, workers=1)
    outcomes = pl.read_parquet(filter_outcomes(cfg, [task], rollouts, tmp_path / "arm"))

    round_reports = read_reports(in_round)
    assert [r.verdict for r in round_reports] == ["accept"]  # the teacher repairs the flipped comparison
    assert _report_view(read_reports(tmp_path / "arm" / "verification")) == _report_view(round_reports)
    assert outcomes["verdict"].to_list() == ["accept"]


def test_the_evaluation_stage_refuses_figures_from_attempts_the_sandbox_broke(tmp_path):
    task = minilib_task(tmp_path / "tasks", "clamp-flip", "`clamp` ignores the upper bound.",
                        MINILIB.replace("if x > hi:", "if x <= hi:"))  # fmt: skip
    broken = trajectory("t-broken", task_id=task.id, task_hash=task.content_hash, exit_reason="sandbox_error")
    write_tables([broken], tmp_path / "rollouts")
    sandboxes = Sandboxes(backend=BACKEND, workers=1)
    with pytest.raises(RuntimeError, match=r"1 attempt\(s\) of r000 ended in a sandbox error"):
        evaluate("unused", [task], tmp_path / "rollouts", tmp_path / "eval", sandboxes,
                 VerifierResource(replays=1).grading(), label="r000", k=1, likelihood=False)  # fmt: skip
    # graded first, as every attempt is: the report says what the verifier saw
    assert (tmp_path / "eval" / "attempts.parquet").is_file()
