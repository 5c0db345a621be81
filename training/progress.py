"""Training progress for whoever launched the trainer: TensorBoard files in the
checkpoint, and each logging step (loss, learning rate, tokens/s) to a
reporter — the Dagster Pipes session when `training.pipes` runs the trainer.

Only the main process reports (under `accelerate launch` every rank logs the same figures)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from torch.utils.tensorboard import SummaryWriter
from transformers.integrations import TensorBoardCallback

Reporter = Callable[[dict[str, float]], None]
_reporters: list[Reporter] = []


def add_reporter(fn: Reporter) -> None:
    """Receive every logging step's figures (`step`, `loss`, `learning_rate`, `tokens_per_s`, ...)."""
    _reporters.append(fn)


class ProgressCallback(TensorBoardCallback):
    """TensorBoard logs, plus each step's figures (with tokens/s) to the reporters."""

    def __init__(self, log_dir: Path):
        super().__init__(tb_writer=SummaryWriter(log_dir=str(log_dir)))
        self._last: tuple[float, float] | None = None  # (time, tokens seen)

    def on_train_begin(self, args, state, control, **kwargs):
        super().on_train_begin(args, state, control, **kwargs)
        self._last = (time.monotonic(), 0.0)

    def on_log(self, args, state, control, logs=None, **kwargs):
        super().on_log(args, state, control, logs=logs, **kwargs)
        if not state.is_world_process_zero or not logs:
            return
        figures = {k: float(v) for k, v in logs.items() if isinstance(v, (int, float))}
        figures["step"] = float(state.global_step)
        tokens = figures.get("num_tokens") or float(getattr(state, "num_input_tokens_seen", 0) or 0)
        now = time.monotonic()
        if tokens and self._last and now > self._last[0]:
            figures["tokens_per_s"] = (tokens - self._last[1]) / (now - self._last[0])
        self._last = (now, tokens)
        for report in _reporters:
            report(figures)
