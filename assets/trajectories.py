"""raw_trajectories: the round's policy (and, on the CPU default, the teacher)
attempts every proposed task in the sandbox (which policies: `touchstone.agent.plan`)."""

import contextlib
import shutil

import dagster as dg

from orchestration.lineage import lineage_metadata, starting_checkpoint
from orchestration.partitions import rounds_partitions
from orchestration.policy_server import PolicyServerResource
from orchestration.publishing import publishing, table_metadata
from orchestration.resources import PolicyResource, RolloutConfig, SandboxResource, StorageResource
from touchstone.paths import Asset


@dg.asset(
    partitions_def=rounds_partitions,
    group_name="round",
    deps=[Asset.PROPOSED_TASKS, Asset.BASE_MODEL],
    kinds={"python"},
    pool="sandbox",
)
def raw_trajectories(
    context: dg.AssetExecutionContext,
    config: RolloutConfig,
    storage: StorageResource,
    sandbox: SandboxResource,
    policy: PolicyResource,
    server: PolicyServerResource,
) -> dg.MaterializeResult:
    """Trajectories of this round: round N runs round N-1's checkpoint (round 0: teacher),
    through the policy server when one is configured."""
    from touchstone.agent.rollout import merge_rollouts
    from touchstone.tasks import load_task_set
    from training.round_engine import roll_out

    store = storage.store()
    round_key = context.partition_key
    start = starting_checkpoint(context.instance, round_key)
    tasks = load_task_set(store.local_dir(Asset.PROPOSED_TASKS, round_key))
    ckpt = store.local_copy(start.path)
    # Rollouts resume from the work dir: a killed run redoes only unfinished attempts.
    # Keyed by the starting weights, so a resume never reuses another checkpoint's runs.
    work = store.work_dir(Asset.RAW_TRAJECTORIES, round_key) / start.checkpoint_hash[:16]
    serve = (
        server.serving(ckpt, start.checkpoint_hash, work, context.log)
        if policy.uses_checkpoint(round_key)
        else contextlib.nullcontext()
    )
    with serve as served, publishing(context, storage) as out:
        specs = policy.round_policies(round_key, ckpt, config.attempts, served)
        parts = [
            roll_out(
                tasks,
                spec,
                attempts,
                work / spec.scheme,
                sandbox.sandboxes(),
                sampling=policy.sampling(),
                limits=policy.limits(spec),
                progress=True,
                log=context.log.info,
            )
            for spec, attempts in specs.items()
        ]
        _refuse_sandbox_failures(parts)
        for part in parts:
            shutil.copytree(part, out / part.name)
        merge_rollouts(parts, out)
    done = store.asset_dir(Asset.RAW_TRAJECTORIES, round_key)
    return dg.MaterializeResult(
        metadata={
            **table_metadata(done / "trajectories.parquet"),
            "policies": dg.MetadataValue.json({str(spec): n for spec, n in specs.items()}),
            **lineage_metadata(start),
        }
    )


def _refuse_sandbox_failures(parts: list) -> None:
    """Fails while an attempt was cut off by the sandbox itself (infrastructure): graded, it
    would be a verdict against the policy; the rerun redoes just those attempts."""
    from touchstone.agent.rollout import sandbox_failures

    failed = [t for part in parts for t in sandbox_failures(part)]
    if failed:
        raise dg.Failure(
            f"{len(failed)} attempt(s) were cut off by the sandbox, not the policy ({failed[0].error}); "
            "nothing of them is graded or trained on: rerun the round to redo them"
        )
