"""Back-to-back rounds: when a round's evaluation lands, start the next round.
Off by default (a long unattended loop should be a deliberate choice)."""

import dagster as dg

from orchestration.jobs import round_job
from orchestration.partitions import next_round_key, rounds_partitions
from orchestration.run_config import env_run_config
from orchestration.schedules import waiting


@dg.sensor(
    job=round_job,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Start the next round as soon as the latest round has been evaluated.",
)
def continuous_rounds(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
    """The new round's key is registered by Dagster from the result (no side
    effect on the instance while the tick is evaluated)."""
    if skip := waiting(context.instance):
        return skip
    run_config = env_run_config()
    key = next_round_key(context.instance)
    return dg.SensorResult(
        run_requests=[dg.RunRequest(run_key=key, partition_key=key, run_config=run_config)],  # retried: no 2nd run
        dynamic_partitions_requests=[rounds_partitions.build_add_request([key])],
    )
