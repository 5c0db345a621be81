"""The scale-out examples are valid: each dagster.yaml passes Dagster's instance
config validation (run launcher class and config included), and the code
location loads with each executor."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from dagster._core.instance.config import dagster_instance_config

from orchestration.executors import EXECUTORS

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "orchestration" / "deploy"


@pytest.mark.parametrize("target", ["docker", "k8s"])
def test_example_instance_config_validates(target, tmp_path):
    (tmp_path / "dagster.yaml").write_text((DEPLOY / target / "dagster.yaml").read_text())
    config, _ = dagster_instance_config(str(tmp_path))
    launcher = yaml.safe_load((DEPLOY / target / "dagster.yaml").read_text())["run_launcher"]
    assert config["run_launcher"]["class"] == launcher["class"]


@pytest.mark.parametrize("kind", EXECUTORS)
def test_definitions_load_with_each_executor(kind):
    code = (
        "from orchestration.definitions import defs\n"
        "job = defs.resolve_job_def('round')\n"
        "print(job.executor_def.name)\n"
    )
    env = {**os.environ, "TOUCHSTONE_EXECUTOR": kind}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == kind


def test_unknown_executor_is_named():
    env = {**os.environ, "TOUCHSTONE_EXECUTOR": "slurm"}
    out = subprocess.run(
        [sys.executable, "-c", "import orchestration.definitions"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0 and "TOUCHSTONE_EXECUTOR='slurm'" in out.stderr
