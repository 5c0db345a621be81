"""Back-to-back rounds: when a round's evaluation lands, start the next round.
Off by default (a long unattended loop should be a deliberate choice)."""

import dagster as dg

from orchestration.jobs import round_job
from orchestration.schedules import next_round_request


@dg.sensor(
    job=round_job,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Start the next round as soon as the latest round has been evaluated.",
)
def continuous_rounds(context: dg.SensorEvaluationContext) -> dg.RunRequest | dg.SkipReason:
    return next_round_request(context.instance)
