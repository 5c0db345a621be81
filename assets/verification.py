"""verification_reports: the independent verifier replays, grades and audits
every trajectory, and the round's canaries (labeled hacked and honest
trajectories) go through the very same verifier."""

import dagster as dg

from orchestration.publishing import publishing, table_metadata
from orchestration.partitions import rounds_partitions
from orchestration.resources import SandboxResource, StorageResource, VerifierResource
from orchestration.storage import read_parquet


@dg.asset(
    partitions_def=rounds_partitions,
    group_name="round",
    deps=["raw_trajectories", "proposed_tasks"],
    kinds={"python"},
    pool="sandbox",
)
def verification_reports(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    sandbox: SandboxResource,
    verifier: VerifierResource,
) -> dg.MaterializeResult:
    """One report per trajectory (verdict, checks, audit findings), plus canary reports."""
    store = storage.store()
    round_key = context.partition_key
    tasks_dir = store.local_dir("proposed_tasks", round_key)
    trajectories_dir = store.local_dir("raw_trajectories", round_key)
    with publishing(context, storage) as out:
        verifier.verify_round(tasks_dir, trajectories_dir, out, sandbox)
        verifier.verify_canaries(out, sandbox, seed=round_key)
    done = store.asset_dir("verification_reports", round_key)
    reports = table_metadata(done / "reports.parquet")
    verdicts = read_parquet(done / "reports.parquet")["verdict"].value_counts().iter_rows()
    return dg.MaterializeResult(metadata={**reports, **{f"verdict_{k}": dg.MetadataValue.int(v) for k, v in verdicts}})
