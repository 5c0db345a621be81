"""Online GRPO: TRL's `GRPOTrainer` generates multi-turn tool-calling rollouts,
the sandbox is the environment (`environment_factory`) and the verifier is the
reward. Meant for GPUs (vLLM: `use_vllm: true`); runs on CPU with
`model.generate` for small checks. Recipe: docs/TRAINING.md.

Each rollout gets its own `SandboxEnvironment`: `reset` opens a fresh sandbox
on the task's workspace, the tool methods run the agent's own tools
(`execute_tool_call`, the function the verifier replays), and `get_reward`
verifies the recorded calls exactly like an offline trajectory — replay in a
fresh sandbox, audit, hidden tests — and maps the verdict to the outcome
reward of docs/CREDIT.md.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from functools import partial
from pathlib import Path

from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from touchstone.agent.loop import SYSTEM_PROMPT
from touchstone.episode.tools import execute_tool_call
from touchstone.tasks.environment import task_environment
from touchstone.data.credit import CreditConfig, outcome_reward
from touchstone.sandbox import open_sandbox
from touchstone.tasks.schema import Task
from touchstone.checkpoint import CheckpointManifest
from training.common import finish, load_base, load_overrides, tensorboard, trl_args


class SandboxEnvironment:
    """One task attempt in a sandbox; public methods are the agent's tools."""

    def __init__(
        self, tasks: dict[str, Task], backend: str = "auto", replays: int = 1, credit: CreditConfig | None = None
    ):
        self.tasks, self.backend, self.replays = tasks, backend, replays
        self.credit = credit or CreditConfig()
        self._stack = contextlib.ExitStack()
        self.task: Task | None = None
        self.messages: list[dict] = []
        self.reward: float | None = None

    def reset(self, task_id: str, **_) -> None:
        self._stack.close()
        self.task = self.tasks[task_id]
        self.sandbox = self._stack.enter_context(
            open_sandbox(self.task.workspace_dir, backend=self.backend, environment=task_environment(self.task))
        )
        self.messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": self.task.statement}]
        self.reward = None

    def _call(self, name: str, **arguments: str) -> str:
        """Execute like the agent loop, and record the call for the verifier's replay."""
        call_id = f"call_{len(self.messages)}"
        args = json.dumps(arguments)
        self.messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}],
            }
        )
        outcome = execute_tool_call(self.sandbox, name, args)
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": outcome.content})
        return outcome.content

    def bash(self, command: str) -> str:
        """Run a bash command in the workspace (cwd = workspace root).

        Args:
            command: The command line to run with bash -c.

        Returns:
            The exit code, stdout and stderr.
        """
        return self._call("bash", command=command)

    def read_file(self, path: str) -> str:
        """Read a text file of the workspace.

        Args:
            path: Path relative to the workspace root.

        Returns:
            The file's text.
        """
        return self._call("read_file", path=path)

    def write_file(self, path: str, content: str) -> str:
        """Create or overwrite a file of the workspace with the given content.

        Args:
            path: Path relative to the workspace root.
            content: The complete new file content.

        Returns:
            A confirmation or an error.
        """
        return self._call("write_file", path=path, content=content)

    def str_replace(self, path: str, old: str, new: str) -> str:
        """Replace the single occurrence of `old` by `new` in a workspace file.

        Args:
            path: Path relative to the workspace root.
            old: Exact text to replace; must occur exactly once.
            new: The replacement text.

        Returns:
            A confirmation or an error.
        """
        return self._call("str_replace", path=path, old=old, new=new)

    def submit(self) -> str:
        """Declare the task done; ends the episode.

        Returns:
            A confirmation.
        """
        return self._call("submit")

    def get_reward(self) -> float:
        """Verify the recorded calls (replay, audit, hidden tests) and map the
        verdict to the outcome reward; inconclusive counts as a reject."""
        from touchstone.verify import verify_trajectory

        self._stack.close()
        report = verify_trajectory(self.task, self.messages, replays=self.replays, backend=self.backend)
        reward = outcome_reward(report, self.credit)
        self.reward = self.credit.reject_reward if reward is None else reward
        return self.reward


def prompt_dataset(tasks: dict[str, Task]) -> Dataset:
    return Dataset.from_list(
        [
            {
                "prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": t.statement}],
                "task_id": t.id,
            }
            for t in tasks.values()
        ]
    )


def build_online_trainer(
    tasks: dict[str, Task],
    base: str | Path,
    work_dir: Path,
    out: Path,
    config: str | Path | dict | None = None,
    backend: str = "auto",
) -> GRPOTrainer:
    model, tokenizer = load_base(base, config)
    tokenizer.padding_side = "left"  # GRPO generates from left-padded prompts
    args = trl_args(
        GRPOConfig,
        work_dir,
        load_overrides(config),
        learning_rate=1e-5,
        num_generations=4,
        per_device_train_batch_size=4,
        max_completion_length=512,
        max_tool_calling_iterations=20,
    )
    return GRPOTrainer(
        model=model,
        args=args,
        train_dataset=prompt_dataset(tasks),
        processing_class=tokenizer,
        environment_factory=partial(SandboxEnvironment, tasks, backend),
        callbacks=[tensorboard(out)],
    )


def train_online(
    tasks: dict[str, Task],
    base: str | Path,
    out: str | Path,
    round_key: str | None = None,
    config: str | Path | dict | None = None,
    backend: str = "auto",
) -> CheckpointManifest:
    out = Path(out)
    with tempfile.TemporaryDirectory(prefix="touchstone-grpo-") as work:
        trainer = build_online_trainer(tasks, base, Path(work), out, config, backend)
        result = trainer.train()
        rewards = [log["reward"] for log in trainer.state.log_history if "reward" in log]
        return finish(
            trainer,
            out,
            base=base,
            round_key=round_key,
            datasets={},
            method="grpo-online",
            metrics={
                "train_loss": result.training_loss,
                "steps": result.global_step,
                "mean_reward": sum(rewards) / len(rewards),
            },
        )


def _main() -> None:
    """`accelerate launch ... -m training.online --tasks DIR --base CKPT --out CKPT [--config YAML]`."""
    import argparse

    from touchstone.tasks.schema import load_task_set

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", required=True, help="Task-set directory to train on.")
    parser.add_argument("--base", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--config", default=None, help="YAML of GRPOConfig fields.")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--round", default=None)
    a = parser.parse_args()
    tasks = {t.id: t for t in load_task_set(a.tasks)}
    train_online(tasks, a.base, a.out, round_key=a.round, config=a.config, backend=a.backend)


if __name__ == "__main__":
    _main()
