"""The shared two-round fixture draws from the shipped seeds, which mix the
base environment (inflection, toolz) and third-party ones (cachetools: a src/
layout installed in editable mode; glom: attrs, boltons, face): tasks of both
kinds are proposed, validated, solved, verified and turned into data, and
every record names the environment it ran in."""

import polars as pl
import pytest

from touchstone.tasks.schema import load_task_set

# the shared two-round fixture: its setup counts in the first test's time
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(3600)]


def test_rounds_mix_base_and_third_party_environments(rounds):
    tasks, trajectories, reports = {}, [], []
    for key in ("r000", "r001"):
        tasks |= {t.id: t for t in load_task_set(rounds.store.asset_dir("proposed_tasks", key))}
        trajectories.append(pl.read_parquet(rounds.store.asset_dir("raw_trajectories", key) / "trajectories.parquet"))
        reports.append(pl.read_parquet(rounds.store.asset_dir("verification_reports", key) / "reports.parquet"))
    with_env = {i for i, t in tasks.items() if t.environment is not None}
    assert with_env and set(tasks) - with_env, "the rounds drew from only one kind of environment"
    assert {tasks[i].source.origin.split("==")[0] for i in with_env} <= {"cachetools", "glom"}

    runs = pl.concat(trajectories)
    digests = dict(zip(runs["task_id"], runs["environment_digest"]))
    assert any(i in with_env for i in digests) and any(i not in with_env for i in digests)
    for task_id, digest in digests.items():
        assert (digest is not None) == (task_id in with_env), task_id
    graded = pl.concat(reports)
    for task_id, digest in zip(graded["task_id"], graded["environment_digest"]):
        if task_id in digests:  # canaries are base-environment tasks of their own
            assert digest == digests[task_id], task_id
