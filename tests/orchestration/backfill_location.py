"""The code location of the daemon backfill test (test_backfill_daemon.py): the
real round partitions and the real lookup of the starting checkpoint
(`orchestration.lineage.starting_checkpoint`, which fails a round whose parent
checkpoint is not materialized yet), around a checkpoint step that takes seconds
instead of a round's ten minutes. What the test exercises is the instance's run
queue, the daemon and that lookup; a whole round would only make it slower."""

import time

import dagster as dg

from orchestration.lineage import starting_checkpoint
from orchestration.partitions import rounds_partitions

# Long enough that a round launched next to a running one would look up its
# parent before that parent's checkpoint is written.
STEP_S = 8


@dg.asset(group_name="sources")
def base_model() -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"path": "base", "checkpoint_hash": "h-base"})


@dg.asset(partitions_def=rounds_partitions, group_name="round", deps=[base_model])
def checkpoint(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    parent = starting_checkpoint(context.instance, context.partition_key)
    time.sleep(STEP_S)
    key = context.partition_key
    return dg.MaterializeResult(
        metadata={
            "path": f"ckpt-{key}",
            "checkpoint_hash": f"h-{key}",
            "parent_checkpoint_hash": parent.checkpoint_hash,
        }
    )


defs = dg.Definitions(
    assets=[base_model, checkpoint],
    jobs=[dg.define_asset_job("round", selection=dg.AssetSelection.groups("round"))],
)
