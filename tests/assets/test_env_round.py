"""A whole round on a task set that mixes the base environment (inflection)
and a third-party one (cachetools: a src/ layout installed in editable mode):
tasks of both kinds are proposed, validated, solved, verified and turned into
data, and every record names the environment it ran in."""

import copy

import polars as pl
import pytest

from orchestration.runner import failed_checks, run_round
from tests.assets.conftest import TINY_CONFIG, fresh_instance, tiny_resources
from touchstone.tasks.schema import load_task_set

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mixed_round(tmp_path_factory):
    config = copy.deepcopy(TINY_CONFIG)
    config["ops"]["seed_sources"] = {"config": {"seeds": ["inflection", "cachetools"]}}
    config["ops"]["proposed_tasks"] = {"config": {"n_tasks": 6}}
    with fresh_instance(tmp_path_factory.mktemp("env-round"), config) as (instance, home, _):
        result = run_round(instance, "r000", resources=tiny_resources(home), run_config=config)
        yield result, home / "rounds" / "r000"


def test_round_mixes_base_and_third_party_environments(mixed_round):
    result, rounds = mixed_round
    assert result.success and not failed_checks(result), failed_checks(result)
    tasks = {t.id: t for t in load_task_set(rounds / "proposed_tasks")}
    with_env = {i for i, t in tasks.items() if t.environment is not None}
    assert with_env and set(tasks) - with_env, "the round drew from only one kind of environment"
    assert all(t.source.origin.startswith("cachetools") for i, t in tasks.items() if i in with_env)

    trajectories = pl.read_parquet(rounds / "raw_trajectories" / "trajectories.parquet")
    digests = dict(zip(trajectories["task_id"], trajectories["environment_digest"]))
    for task_id, digest in digests.items():
        assert (digest is not None) == (task_id in with_env), task_id
    reports = pl.read_parquet(rounds / "verification_reports" / "reports.parquet")
    for task_id, digest in zip(reports["task_id"], reports["environment_digest"]):
        if task_id in digests:  # canaries are base-environment tasks of their own
            assert digest == digests[task_id], task_id
