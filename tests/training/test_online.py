"""Online GRPO: the sandbox as environment, the verifier as reward."""

from __future__ import annotations

from pathlib import Path

import pytest

import touchstone.verify
from touchstone.tasks.schema import load_task
from touchstone.checkpoint import verify_checkpoint
from training.online import SandboxEnvironment, train_online

TASK_DIR = Path(touchstone.verify.__file__).parent / "canaries" / "tasks" / "combi"


@pytest.fixture(scope="module")
def tasks():
    task = load_task(TASK_DIR)
    return {task.id: task}


def test_environment_tools_run_in_the_sandbox_and_the_verifier_rewards(tasks):
    task = next(iter(tasks.values()))
    env = SandboxEnvironment(tasks, backend="bwrap")
    env.reset(task_id=task.id)
    assert "NotImplementedError" in env.read_file("combi.py")
    env.write_file("combi.py", (task.reference_dir / "combi.py").read_text())
    assert "exit code: 0" in env.bash("python -m pytest -q tests/test_visible.py")
    env.submit()
    assert env.get_reward() == 1.0
    env.reset(task_id=task.id)  # a fresh sandbox: the fix is gone
    assert "NotImplementedError" in env.read_file("combi.py")
    env.submit()
    assert env.get_reward() == 0.0


@pytest.mark.slow
def test_grpo_with_environment_factory_runs_on_cpu(tasks, tiny_model, tmp_path):
    out = tmp_path / "ckpt"
    manifest = train_online(
        tasks,
        tiny_model,
        out,
        config={
            "max_steps": 2,
            "num_generations": 2,
            "per_device_train_batch_size": 2,
            "max_completion_length": 16,
            "max_tool_calling_iterations": 2,
            "learning_rate": 1e-3,
        },
        backend="bwrap",
    )
    assert manifest.metrics["steps"] == 2 and verify_checkpoint(out).config["method"] == "grpo-online"
    # The verifier scored every rollout: an untrained tiny model solves nothing, so the reward is the reject reward.
    assert manifest.metrics["mean_reward"] == 0.0
