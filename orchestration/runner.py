"""Run rounds in-process against a Dagster instance, with progress output.

Used by `touchstone round run` and `make demo`; the UI and
`dagster asset materialize` run the very same assets and checks. A round is one
run, so the blocking checks on training_data stop training within it."""

import threading
import time
from collections.abc import Mapping

import dagster as dg
from rich.console import Console

from orchestration.lineage import latest_metadata, unfinished_round
from orchestration.partitions import register_round
from touchstone.paths import Asset

ROUND_STAGES = [
    Asset.PROPOSED_TASKS,
    Asset.RAW_TRAJECTORIES,
    Asset.VERIFICATION_REPORTS,
    Asset.TRAINING_DATA,
    Asset.CHECKPOINT,
    Asset.ROUND_EVALUATION,
]
SOURCE_STAGES = [Asset.SEED_SOURCES, Asset.HELDOUT_TASKS, Asset.BASE_MODEL, Asset.BASE_EVALUATION]
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def _definitions():
    # Imported here: the definitions module imports every asset module.
    from orchestration.checks import round_checks
    from orchestration.definitions import ASSET_MODULES

    return [*dg.load_assets_from_modules(ASSET_MODULES), *round_checks]


def materialize(
    instance: dg.DagsterInstance,
    selection: list[str],
    *,
    partition_key: str | None = None,
    resources: Mapping[str, object] | None = None,
    run_config: Mapping | None = None,
    console: Console | None = None,
) -> dg.ExecuteInProcessResult:
    """Materialize `selection` (and the checks on it) in one run, printing each
    stage as it lands. Failed steps and failed blocking checks do not raise: the
    result says what happened."""
    from orchestration.resources import default_resources

    watcher = _ProgressWatcher(instance, selection, partition_key, console or Console(stderr=True))
    watcher.start()
    try:
        return dg.materialize(
            _definitions(),
            selection=dg.AssetSelection.assets(*selection),
            instance=instance,
            partition_key=partition_key,
            resources={**default_resources(), **(resources or {})},
            run_config=_run_config_for(selection, run_config or {}),
            raise_on_error=False,
        )
    finally:
        watcher.stop()


def _run_config_for(selection: list[str], run_config: Mapping) -> dict:
    """Quiet console logs, and only the `ops` config of selected assets (Dagster
    rejects config for ops outside the run), so one settings dict serves all runs."""
    ops = {k: v for k, v in run_config.get("ops", {}).items() if k in selection}
    return {**QUIET, **run_config, "ops": ops}


def ensure_sources(instance: dg.DagsterInstance, **kwargs) -> dg.ExecuteInProcessResult | None:
    """Materialize the shared sources that have never been materialized."""
    missing = [s for s in SOURCE_STAGES if latest_metadata(instance, dg.AssetKey(s)) is None]
    return materialize(instance, missing, **kwargs) if missing else None


def run_round(instance: dg.DagsterInstance, round_key: str | None = None, **kwargs) -> dg.ExecuteInProcessResult:
    """Register the round and materialize its stages in one run. Default round: the
    latest one if it was never evaluated (a rerun finishes it), else the next."""
    key = register_round(instance, round_key or unfinished_round(instance))
    return materialize(instance, stages_to_run(instance, key), partition_key=key, **kwargs)


# The leading stages no check gates: an interrupted round's rerun keeps them (its tasks are
# not proposed anew; finished rollouts are not redone). Every later stage reruns, with its checks.
KEPT_ON_RESUME = ROUND_STAGES[:2]


def stages_to_run(instance: dg.DagsterInstance, key: str) -> list[str]:
    """All stages of a finished round (an explicit rerun); of an unfinished one, the
    stages from the first that is not kept (KEPT_ON_RESUME, materialized for this round)."""
    if latest_metadata(instance, dg.AssetKey(Asset.ROUND_EVALUATION), key) is not None:
        return list(ROUND_STAGES)
    start = 0
    while start < len(KEPT_ON_RESUME) and latest_metadata(instance, dg.AssetKey(ROUND_STAGES[start]), key):
        start += 1
    return ROUND_STAGES[start:]


def failed_checks(result: dg.ExecuteInProcessResult) -> list[str]:
    """Failed error-severity checks (a checkpoint not promoted is a warning, not a failed round)."""
    return [
        e.check_name
        for e in result.get_asset_check_evaluations()
        if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR
    ]


def describe_failures(result: dg.ExecuteInProcessResult) -> list[str]:
    """One line per failed check (with its evidence, the check's metadata) and per failed step."""
    checks = [
        f"check {e.check_name}: " + ", ".join(f"{k}={v.value}" for k, v in e.metadata.items())
        for e in result.get_asset_check_evaluations()
        if not e.passed
    ]
    steps = [
        f"step {e.step_key}: {innermost(e.step_failure_data.error).message.strip()[:500]}"
        for e in result.all_events
        if e.is_step_failure and e.step_failure_data.error is not None
    ]
    # A resource that could not start (e.g. the data root's writer lock, held by another
    # process) fails the run before any step.
    resources = [
        f"resources: {innermost(e.event_specific_data.error).message.strip()[:500]}"
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.RESOURCE_INIT_FAILURE and e.event_specific_data.error is not None
    ]
    return checks + resources + steps


def innermost(error):
    """The error that started it: a failed step's own message is Dagster's wrapper
    ("Error occurred while executing op ..."), which names no cause."""
    while error.cause is not None:
        error = error.cause
    return error


class _ProgressWatcher:
    """Polls the instance for materializations of the watched stages and prints them."""

    def __init__(self, instance, stages, partition_key, console: Console, interval_s: float = 1.0):
        self.instance, self.stages, self.partition = instance, list(stages), partition_key
        self.console, self.interval_s = console, interval_s
        self.started = time.time()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        label = f"round {self.partition}" if self.partition else "sources"
        self.console.print(f"[bold]{label}[/]: {', '.join(self.stages)}")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._poll()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._poll()
            except Exception:  # noqa: BLE001 - the instance's database away (restarting): the run says why, if it fails
                continue  # progress lines resume with it; a dead thread would print a traceback and stop them

    def _poll(self) -> None:
        for stage in list(self.stages):
            records = self.instance.fetch_materializations(
                dg.AssetRecordsFilter(
                    asset_key=dg.AssetKey(stage),
                    asset_partitions=[self.partition] if self.partition else None,
                    after_timestamp=self.started,
                ),
                limit=1,
            ).records
            if records:
                self.stages.remove(stage)
                elapsed = records[0].timestamp - self.started
                self.console.print(f"  [green]done[/] {stage}  (+{elapsed:.0f} s)")
