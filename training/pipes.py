"""Training as a Dagster Pipes step: the `checkpoint` asset runs
`python -m training.pipes PARAMS_JSON` (or the same under `accelerate launch`)
with `PipesSubprocessClient` (`PipesK8sClient` on a cluster, docs/TRAINING.md).

The main process opens the Pipes session: each logging step goes to the
asset's log as it happens (loss, learning rate, tokens/s), and the end reports
the checkpoint hash, the final metrics and the loss curve as materialization
metadata. A trainer exception closes the session with that exception and a
non-zero exit, and the error is written to `error_file` for the step to fail with. Only
`dagster_pipes` (no `dagster`) is imported here.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from training.progress import add_reporter
from training.train import train


def _is_main_process() -> bool:
    """Rank 0 of a launch, or a plain single-process run."""
    return os.environ.get("RANK", "0") == "0"


def _train(params: dict[str, Any]):
    return train(
        params["method"],
        data_dir=params["data_dir"],
        base=params["base"],
        out=params["out"],
        round_key=params.get("round_key"),
        config=params.get("config") or {},
    )


def main(argv: list[str]) -> None:
    params = json.loads(argv[0])
    if not _is_main_process():
        _train(params)
        return
    from dagster_pipes import open_dagster_pipes

    with open_dagster_pipes() as pipes:
        curve: list[dict[str, float]] = []

        def report(figures: dict[str, float]) -> None:
            curve.append(figures)
            pipes.log.info("train " + " ".join(f"{k}={v:.6g}" for k, v in figures.items()))

        add_reporter(report)
        pipes.log.info(f"training {params['method']} from {params['base']} into {params['out']}")
        try:
            manifest = _train(params)
        except Exception as exc:
            # The launcher sees only an exit code: leave it the trainer's own error.
            if params.get("error_file"):
                Path(params["error_file"]).write_text(f"{type(exc).__name__}: {exc}")
            raise
        speeds = [f["tokens_per_s"] for f in curve if "tokens_per_s" in f]
        metadata: dict[str, Any] = {
            "checkpoint_hash": manifest.content_hash,
            **{k: float(v) for k, v in manifest.metrics.items()},
            "loss_curve": {
                "raw_value": [{"step": f["step"], "loss": f["loss"]} for f in curve if "loss" in f],
                "type": "json",
            },
        }
        if speeds:
            metadata["tokens_per_s"] = sum(speeds) / len(speeds)
        pipes.report_asset_materialization(metadata=metadata)


if __name__ == "__main__":
    main(sys.argv[1:])
