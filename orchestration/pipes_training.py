"""Training a checkpoint from a round's verified data as a Dagster Pipes subprocess
(`training.pipes`, under `accelerate launch` when configured): what the round's
`checkpoint` and a round's control arm (`control_evaluation`) both run."""

import os
import tempfile
from pathlib import Path

import dagster as dg
from dagster._core.errors import DagsterPipesExecutionError  # what a failed Pipes process raises; not re-exported

from orchestration.resources import TrainerResource
from touchstone.paths import Asset

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def train_on_round_data(
    context, pipes: dg.PipesSubprocessClient, store, trainer: TrainerResource, data_round: str, *, base: str,
    out: Path, label: str, config: dict,
) -> tuple[dg.MaterializeResult, dict]:  # fmt: skip
    """Train `base` into `out` on `data_round`'s verified data (with the replay settings) under
    Pipes; the trainer's reported result and the rows per round it trained on."""
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = store.local_dir(Asset.TRAINING_DATA, data_round)
        train_dir, replayed = _replayed_data(store, data_round, data_dir, trainer, Path(tmp) / "data")
        params = {
            "method": trainer.method,
            "data_dir": str(train_dir),
            "base": base,
            "out": str(out),
            "round_key": label,
            "config": config,
            "error_file": f"{tmp}/error",
        }
        return _run_trainer(context, pipes, trainer.pipes_command(params), Path(tmp) / "error"), replayed


def _replayed_data(store, round_key: str, data_dir: Path, trainer: TrainerResource, out: Path) -> tuple[Path, dict]:
    """The data dir to train on: this round's, or (SFT with `replay_rounds` /
    `replay_warm_start`) its rows followed by the verified rows of earlier rounds
    and of the warm start; with the rows per round."""
    if trainer.method != "sft" or (trainer.replay_rounds <= 0 and not trainer.replay_warm_start):
        return data_dir, {}
    from touchstone.data.replay import replay_dataset
    from touchstone.paths import WARM_START_DATA
    from touchstone.rounds import earlier_round_keys

    keys = earlier_round_keys(store.round_files(Asset.TRAINING_DATA, "sft.parquet"), round_key, trainer.replay_rounds)
    earlier = [store.local_dir(Asset.TRAINING_DATA, k) for k in keys]
    if trainer.replay_warm_start and store.asset_dir(WARM_START_DATA).exists():
        earlier.append(store.local_dir(WARM_START_DATA))
    return out, replay_dataset(data_dir, earlier, out)


def _run_trainer(
    context, pipes: dg.PipesSubprocessClient, command: list[str], error_file: Path
) -> dg.MaterializeResult:
    """Run the training command under Pipes; a crash fails the step with the trainer's error."""
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        return pipes.run(command=command, context=context, cwd=str(PROJECT_ROOT), env=env).get_materialize_result()
    except DagsterPipesExecutionError as exc:
        error = error_file.read_text() if error_file.exists() else "no error reported (killed?)"
        raise dg.Failure(f"training failed: {error}") from exc
