"""verification_reports: the independent verifier replays, grades and audits
every trajectory, and the round's canaries (labeled hacked and honest
trajectories) go through the very same verifier."""

import dagster as dg

from orchestration.publishing import publishing, table_metadata
from orchestration.partitions import rounds_partitions
from orchestration.resources import SandboxResource, StorageResource, VerifierResource
from orchestration.storage import read_parquet
from touchstone.paths import Asset


@dg.asset(
    partitions_def=rounds_partitions,
    group_name="round",
    deps=[Asset.RAW_TRAJECTORIES, Asset.PROPOSED_TASKS],
    kinds={"python"},
    pool="sandbox",
)
def verification_reports(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    sandbox: SandboxResource,
    verifier: VerifierResource,
) -> dg.MaterializeResult:
    """One report per trajectory (verdict, checks, audit findings), plus canary reports.
    First each task's reference is graded as the trajectories are: a task whose
    reference fails is revoked in the round's task index (its proposer's reward
    taken back), and its trajectories are reported against a revoked task."""
    from training.round_engine import verify

    store = storage.store()
    round_key = context.partition_key
    tasks_dir = store.local_dir(Asset.PROPOSED_TASKS, round_key)
    revoked = verifier.revoke_failing_references(tasks_dir, sandbox)
    if revoked:
        store.write_back(Asset.PROPOSED_TASKS, round_key, tasks_dir)
    trajectories_dir = store.local_dir(Asset.RAW_TRAJECTORIES, round_key)
    with publishing(context, storage) as out:
        verify(tasks_dir, trajectories_dir, out, sandbox.sandboxes(), verifier.grading(), revoked=revoked)
        verifier.verify_canaries(out, sandbox, seed=round_key)
    done = store.asset_dir(Asset.VERIFICATION_REPORTS, round_key)
    reports = table_metadata(done / "reports.parquet")
    verdicts = read_parquet(done / "reports.parquet")["verdict"].value_counts().iter_rows()
    revocations = {r.task_id: r.evidence for r in revoked}
    return dg.MaterializeResult(
        metadata={
            **reports,
            **{f"verdict_{k}": dg.MetadataValue.int(v) for k, v in verdicts},
            "revoked_tasks": dg.MetadataValue.json(revocations),
        }
    )
