"""Caches that serve (issue 37): what `make test` builds in TOUCHSTONE_CACHE is found by
`make demo` on the same machine. The warm start is the costly entry (about 10 minutes of
a demo). Its key is a hash of its inputs only: the same inputs built under a test's
context (a pytest temporary data root, CI's variables, another working directory) and
under a demo's (a checkout's `.touchstone`, a plain shell) give the same key, so the
second finds the first's warm start. Real `dagster asset materialize` runs of the
sources, real sandboxes, a real (one-step) warm start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml

from orchestration.lineage import latest_metadata

DAGSTER = str(Path(sys.executable).with_name("dagster"))
REPO = Path(__file__).resolve().parents[1]

# The demo's settings but one seed, one held-out task and a one-task, one-step warm start.
SMALL = {
    "ops": {
        "seed_sources": {"config": {"seeds": ["inflection"]}},
        "heldout_tasks": {"config": {"n_tasks": 1}},
        "base_model": {"config": {"n_tasks": 1, "max_steps": 1}},
    },
    "resources": {"sandbox": {"config": {"backend": "bwrap"}}},
}


def _sources(home: Path, cwd: Path, env: dict, config: Path) -> tuple[dict, str]:
    """Materialize the shared sources as the README's command does; the base_model's warm
    start record and the run's output."""
    dagster_home = home / "dagster_home"
    dagster_home.mkdir(parents=True)
    env = {**env, "TOUCHSTONE_HOME": str(home), "DAGSTER_HOME": str(dagster_home), "PYTHONPATH": str(REPO)}
    select = "seed_sources,heldout_tasks,base_model"
    run = subprocess.run(
        [DAGSTER, "asset", "materialize", "-m", "orchestration.definitions", "--select", select, "-c", str(config)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=2400,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        metadata, _ = latest_metadata(instance, dg.AssetKey("base_model"))
    return metadata["warm_start"], run.stdout + run.stderr


@pytest.mark.slow
def test_a_demo_finds_the_warm_start_a_test_built_with_the_same_inputs(tmp_path):
    config = tmp_path / "small.yaml"
    config.write_text(yaml.safe_dump(SMALL))
    tested = {**os.environ, "CI": "true", "TOUCHSTONE_REQUIRE_DOCKER": "1"}  # pytest's own variables too
    built, _ = _sources(tmp_path / "pytest-home", tmp_path, tested, config)

    clone = tmp_path / "clone"  # `make demo` in a checkout: its `.touchstone`, a shell's variables
    clone.mkdir()
    plain = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST", "TOUCHSTONE_")) and k != "CI" or k == "TOUCHSTONE_CACHE"
    }
    demo, log = _sources(clone / ".touchstone", clone, plain, config)

    assert demo["key"] == built["key"]
    assert "warm start: cached" in log and "warm start: not cached" not in log, log[-3000:]
    assert demo == built  # the very same record: the same weights, rows and checkpoint hash
