"""One round of expert iteration on a tiny task set (real sandbox, teacher, verifier, trainer):
the model samples its own runs, the verifier grades them, and the rows it trains on say who
wrote them; teacher rows come only when asked for, labelled as the teacher's."""

from __future__ import annotations

import polars as pl

from tests.agent.conftest import MINILIB, minilib_task
from touchstone.agent.loop import EpisodeLimits
from touchstone.episode.trajectory import Sampling
from touchstone.checkpoint import read_manifest
from training.expert_iteration import expert_iteration_round
from training.model_init import default_model


def test_one_round_samples_the_checkpoint_and_labels_every_training_row(tmp_path):
    minilib_task(
        tmp_path / "tasks",
        "clamp-flip",
        "`clamp` ignores the upper bound.",
        MINILIB.replace("if x > hi:", "if x <= hi:"),
    )
    base = default_model()
    kwargs = dict(
        attempts=2,
        sampling=Sampling(temperature=1.0, max_tokens=32, seed=0),
        limits=EpisodeLimits(max_turns=2),
        trainer_config={"max_steps": 2, "max_length": 512},
        backend="bwrap",
    )
    # The tiny model solves nothing: with one teacher attempt asked for, the round trains on
    # the teacher's accepted run, and says so (no row of the model's own).
    first = expert_iteration_round(base, tmp_path / "tasks", tmp_path / "r000", teacher_attempts=1, **kwargs)
    policies = pl.read_parquet(tmp_path / "r000" / "rollouts" / "trajectories.parquet")["policy"].to_list()
    assert policies.count(f"hf:{base}") == 2 and policies.count("teacher") == 1
    assert first.trained and first.authors == {"teacher": first.rows} and first.own_share == 0.0
    assert first.tasks_solved == 0 and first.runs == 3
    assert read_manifest(first.checkpoint).parent_hash == first.start_hash
    # Without the teacher, the next round samples the new checkpoint only; its rows, if any, are its own.
    second = expert_iteration_round(first.checkpoint, tmp_path / "tasks", tmp_path / "r001", round_key="r001", **kwargs)
    policies = pl.read_parquet(tmp_path / "r001" / "rollouts" / "trajectories.parquet")["policy"].unique().to_list()
    assert policies == [f"hf:{first.checkpoint}"] and second.start_hash == first.checkpoint_hash
    assert set(second.authors) <= {"model"} and second.trained == bool(second.rows)
    assert second.rollouts_per_min > 0
