"""Rounds through a deployed instance: register the round on the instance,
submit the job to the webserver (the run queue; the daemon launches it with the
instance's run launcher), wait, and say what happened."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

import dagster as dg
import sqlalchemy
from dagster_postgres.utils import DagsterPostgresException

from orchestration.deploy.stack import (
    LOCATION,
    DeployError,
    Stack,
    _graphql,
    host_instance,
    prune_run,
)
from orchestration.lineage import latest_metadata, unfinished_round
from orchestration.partitions import register_round
from orchestration.runner import QUIET, ROUND_STAGES, SOURCE_STAGES, _run_config_for, innermost

FINISHED = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}


@dataclass
class RunOutcome:
    run_id: str
    job: str
    partition: str | None
    status: str
    wall_s: float
    failed_checks: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return self.status == "SUCCESS" and not self.failed_checks


_LAUNCH = """mutation($params: ExecutionParams!) { launchPipelineExecution(executionParams: $params) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
  ... on RunConfigValidationInvalid { errors { message } } ... on InvalidSubsetError { message } } }"""


SUBMISSION_TAG = "touchstone/submission"
# What a PythonError says when the webserver's pooled database connection died with a
# PostgreSQL restart: the first write on it fails, and SQLAlchemy then replaces it.
_CLOSED_CONNECTION = ("server closed the connection", "terminating connection", "connection already closed")


def submit(stack: Stack, instance: dg.DagsterInstance, job: str, run_config: Mapping, tags: Mapping[str, str]) -> str:
    """Submit a job run to the deployment's webserver; returns the run id. A submission
    the webserver's stale database connection cut short (after a PostgreSQL restart)
    leaves a run that never starts: it is deleted and the submission made again."""
    tags = {**tags, SUBMISSION_TAG: uuid.uuid4().hex}
    for attempt in itertools.count(1):
        try:
            return _launch(stack, job, run_config, tags)
        except DeployError as exc:
            if attempt == 3 or not any(s in str(exc) for s in _CLOSED_CONNECTION):
                raise
        for run in instance.get_runs(dg.RunsFilter(tags={SUBMISSION_TAG: tags[SUBMISSION_TAG]})):
            if run.status != dg.DagsterRunStatus.NOT_STARTED:
                return run.run_id  # it was queued after all
            instance.delete_run(run.run_id)


def _launch(stack: Stack, job: str, run_config: Mapping, tags: Mapping[str, str]) -> str:
    selector = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__", "jobName": job}
    params = {
        "selector": selector,
        "runConfigData": dict(run_config),
        "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]},
    }
    result = _graphql(stack, _LAUNCH, {"params": params})["launchPipelineExecution"]
    if result["__typename"] != "LaunchRunSuccess":
        raise DeployError(f"submitting {job} was refused ({result['__typename']}): {result}")
    return result["run"]["runId"]


def wait(instance: dg.DagsterInstance, run_id: str, timeout_s: float, log=print) -> RunOutcome:
    """Poll the run until it finishes. The instance's PostgreSQL may restart meanwhile:
    the run goes on without this process, which says so once and keeps polling."""
    started = time.monotonic()
    last = None
    while True:
        try:
            run = instance.get_run_by_id(run_id)
        except (DagsterPostgresException, sqlalchemy.exc.DBAPIError) as exc:  # no answer past Dagster's retries
            if last != "away":
                log(f"  run {run_id[:8]}: the instance's database does not answer ({str(exc).splitlines()[0][:160]})")
            last, run = "away", None
        if run is not None and run.status != last:
            log(f"  run {run_id[:8]} {run.job_name} {run.tags.get('dagster/partition', '')}: {run.status.value}")
            last = run.status
        if run is not None and run.status in FINISHED:
            break
        if time.monotonic() - started > timeout_s:
            raise DeployError(f"run {run_id} did not finish within {timeout_s:.0f} s (last seen: {last})")
        time.sleep(2)
    return RunOutcome(
        run_id=run_id,
        job=run.job_name,
        partition=run.tags.get("dagster/partition"),
        status=run.status.value,
        wall_s=time.monotonic() - started,
        failed_checks=_failed_checks(instance, run_id),
        failures=_failures(instance, run_id),
    )


def _failed_checks(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    events = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    return [
        e.dagster_event.event_specific_data.check_name
        for e in events  # warnings (promotion_gate) pass
        if not e.dagster_event.event_specific_data.passed
        and e.dagster_event.event_specific_data.severity == dg.AssetCheckSeverity.ERROR
    ]


def _failures(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    kinds = {dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.RUN_FAILURE}
    lines = []
    for record in instance.all_logs(run_id, of_type=kinds):
        event = record.dagster_event
        error = getattr(event.event_specific_data, "error", None)
        message = innermost(error).message.strip()[:800] if error else (event.message or "")
        lines.append(f"{event.step_key or 'run'}: {message}")
    return lines


def run_rounds(
    stack: Stack, n_rounds: int = 1, run_config: Mapping | None = None, *, timeout_s: float = 3600, log=print
) -> list[RunOutcome]:
    """The shared sources if never materialized, then `n_rounds` rounds (an
    unfinished latest round first), one run each, through the deployment.
    Stops at the first run that fails."""
    run_config = run_config or {}
    outcomes = []
    with host_instance(stack) as instance:
        if any(latest_metadata(instance, dg.AssetKey(s)) is None for s in SOURCE_STAGES):
            outcomes.append(_one(stack, instance, "sources", SOURCE_STAGES, None, run_config, timeout_s, log))
            if not outcomes[-1].success:
                return outcomes
        for _ in range(n_rounds):
            key = register_round(instance, unfinished_round(instance))
            outcomes.append(_one(stack, instance, "round", ROUND_STAGES, key, run_config, timeout_s, log))
            if not outcomes[-1].success:
                break
    return outcomes


def _one(stack, instance, job, stages, key, run_config, timeout_s, log) -> RunOutcome:
    config = {**QUIET, **_run_config_for(stages, run_config)}
    tags = {"dagster/partition": key} if key else {}
    run_id = submit(stack, instance, job, config, tags)
    outcome = wait(instance, run_id, timeout_s, log)
    prune_run(stack, run_id)
    return outcome
