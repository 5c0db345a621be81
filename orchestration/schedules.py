"""Start the next round at night: register its partition key, then request its run.

Dynamic partitions cannot use `build_schedule_from_partitioned_job`, so the
schedule adds the key itself. Off by default; turn it on in the UI. Its runs
(and the sensor's) take the run config named by TOUCHSTONE_RUN_CONFIG
(orchestration/run_config.py); unset, the laptop defaults."""

import dagster as dg

from orchestration.jobs import round_job
from orchestration.lineage import unfinished_round
from orchestration.partitions import register_round
from orchestration.run_config import configured_store, env_run_config


def waiting(instance: dg.DagsterInstance) -> dg.SkipReason | None:
    """Why no new round starts yet: the latest round has not been evaluated, or
    another process writes the data root (e.g. `touchstone round run` from a shell)."""
    pending = unfinished_round(instance)
    if pending:
        return dg.SkipReason(f"round {pending} has not finished (no round_evaluation yet)")
    holder = configured_store(env_run_config()).writer_lock().busy()
    return dg.SkipReason(f"the data root is being written by {holder.describe()}") if holder else None


def next_round_request(instance: dg.DagsterInstance) -> dg.RunRequest | dg.SkipReason:
    """A run for a new round, unless the latest round has not been evaluated yet.
    (A schedule cannot return partition requests: it registers the key itself.)"""
    if skip := waiting(instance):
        return skip
    run_config = env_run_config()  # before registering: a bad file must not leave a key without a run
    key = register_round(instance)
    # run_key: a tick that is retried does not start the same round twice
    return dg.RunRequest(run_key=key, partition_key=key, run_config=run_config)


@dg.schedule(
    job=round_job,
    cron_schedule="0 2 * * *",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Nightly: register the next round key and run the round.",
)
def nightly_round(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
    return next_round_request(context.instance)
