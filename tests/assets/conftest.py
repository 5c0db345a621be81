"""Two real rounds, materialized once per session on a fresh Dagster instance
and data root with tiny settings (bwrap or Docker sandbox, the teacher in
r000, the tiny model after), shared by the round, CLI and UI tests."""

import contextlib
import os
import types
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from orchestration.resources import (
    PolicyResource,
    SandboxResource,
    StorageResource,
    TrainerResource,
    VerifierResource,
)
from orchestration.runner import ensure_sources, failed_checks, run_round
from tests.training.conftest import data_dir, tiny_model  # noqa: F401 (fixtures of the checkpoint tests)

# Few tasks, short episodes, one optimizer step. Eight tasks, because the
# teacher cannot invert some mutations (removed statements): with fewer, a round
# could hold no accepted run and make no update, and these tests follow a trained
# checkpoint from round to round (the no-update path: test_no_update.py). Seeds:
# the two base-environment ones and cachetools (a third-party environment); the
# teacher solves none of glom's mutants, which only made rounds stop.
TINY_CONFIG = {
    "ops": {
        "seed_sources": {"config": {"seeds": ["inflection", "toolz", "cachetools"]}},
        "heldout_tasks": {"config": {"n_tasks": 1}},
        "base_model": {"config": {"n_tasks": 0}},  # no warm start (tests/training/test_warm_start.py)
        "proposed_tasks": {"config": {"n_tasks": 8}},
        "raw_trajectories": {"config": {"attempts": 1}},
        # the base without likelihood figures (a run config may drop them: local-smollm2.yaml), the rounds with
        "base_evaluation": {"config": {"attempts": 2, "bootstrap": 200, "likelihood": False}},
        "round_evaluation": {"config": {"attempts": 2, "bootstrap": 200, "promotion_rule": "paired"}},
    }
}


def tiny_resources(home: Path, **overrides) -> dict:
    return {
        "storage": StorageResource(root=str(home)),
        "sandbox": SandboxResource(workers=2),
        # 16 teacher turns, not the laptop's 10: these draws' r001 has a repair that takes
        # more than 10 turns, and these tests follow a trained checkpoint from round to round
        "policy": PolicyResource(max_tokens=24, max_turns=8, teacher_attempts=1, teacher_max_turns=16),
        "verifier": VerifierResource(replays=1, canaries=2),
        "trainer": TrainerResource(max_steps=1),
        **overrides,
    }


def tiny_run_config(**resources: dict) -> dict:
    """The tiny settings as run config (`touchstone round run -c`, a deployment): the data
    root is the runner's. `resources`: resource name -> config merged over the tiny one."""
    tiny = {k: r.model_dump(exclude_unset=True) for k, r in tiny_resources(home=None).items() if k != "storage"}
    names = tiny.keys() | resources.keys()
    return {**TINY_CONFIG, "resources": {k: {"config": {**tiny.get(k, {}), **resources.get(k, {})}} for k in names}}


@contextlib.contextmanager
def fresh_instance(base: Path, run_config: dict = TINY_CONFIG) -> Iterator[tuple[dg.DagsterInstance, Path, dict]]:
    """A fresh TOUCHSTONE_HOME and DAGSTER_HOME below `base` (set in the environment
    meanwhile), with the shared sources materialized: (instance, home, variables)."""
    home, dagster_home = base / "touchstone", base / "dagster_home"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {"TOUCHSTONE_HOME": str(home), "DAGSTER_HOME": str(dagster_home)}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        instance = dg.DagsterInstance.get()
        sources = ensure_sources(instance, resources=tiny_resources(home), run_config=run_config)
        assert sources.success, "sources failed"
        yield instance, home, env


@pytest.fixture(scope="session")
def rounds(tmp_path_factory):
    """TOUCHSTONE_HOME and DAGSTER_HOME with sources, r000 and r001 materialized."""
    with fresh_instance(tmp_path_factory.mktemp("rounds")) as (instance, home, env):
        results = {}
        for key in ("r000", "r001"):
            result = run_round(instance, key, resources=tiny_resources(home), run_config=TINY_CONFIG)
            assert result.success and not failed_checks(result), f"round {key} failed: {failed_checks(result)}"
            results[key] = result
        yield types.SimpleNamespace(
            instance=instance,
            home=home,
            env={**os.environ, **env},
            results=results,
            store=StorageResource(root=str(home)).store(),
        )
