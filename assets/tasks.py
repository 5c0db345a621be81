"""proposed_tasks: new validated tasks for the round from its sources
(procedural, imported, self-proposed), with rejection reasons."""

import contextlib

import dagster as dg
import polars as pl

from orchestration.lineage import starting_checkpoint
from orchestration.partitions import rounds_partitions
from orchestration.policy_server import PolicyServerResource
from orchestration.publishing import publishing, table_metadata
from orchestration.resources import PolicyResource, ProposeConfig, SandboxResource, StorageResource
from orchestration.storage import read_parquet
from touchstone.paths import Asset


@dg.asset(
    partitions_def=rounds_partitions,
    group_name="round",
    deps=[Asset.SEED_SOURCES, Asset.HELDOUT_TASKS, Asset.BASE_MODEL],
    kinds={"python"},
    pool="sandbox",
)
def proposed_tasks(
    context: dg.AssetExecutionContext,
    config: ProposeConfig,
    storage: StorageResource,
    sandbox: SandboxResource,
    policy: PolicyResource,
    server: PolicyServerResource,
) -> dg.MaterializeResult:
    """Tasks proposed and validated for this round; index.parquet lists every
    candidate, kept or rejected with its reason; sources.json the outcome per source."""
    from touchstone.rounds import round_index
    from training.round_engine import propose

    store = storage.store()
    round_key = context.partition_key
    mix = config.mix()
    with publishing(context, storage) as out, _proposer(context, config, store, policy, server) as proposer:
        # The round index seeds the proposers: each round gets new tasks, a rerun the same ones.
        summary = propose(
            out,
            mix,
            sandbox.sandboxes(),
            seeds=storage.seed_dirs(),
            heldout=store.local_dir(Asset.HELDOUT_TASKS),
            rng_seed=round_index(round_key),
            contamination_sets=config.contamination_sets,
            policy=proposer,
            history=_history(store, round_key, config.self_history if config.self_proposals else 0),
            round_key=round_key,
        )
        if config.level != "site":
            from touchstone.taskmaking.curriculum import show_functions

            shown = show_functions(out, config.level)
            context.log.info(f"curriculum level {config.level}: {shown} task statements show where the bug is")
    done = store.asset_dir(Asset.PROPOSED_TASKS, round_key)
    index = read_parquet(done / "index.parquet")
    reasons = index.filter(pl.col("status") == "rejected")["reason"].value_counts().iter_rows()
    if mix.self_play.n:
        context.log.info(f"self-proposal: {summary.note}")
    return dg.MaterializeResult(
        metadata={
            **table_metadata(done / "index.parquet"),
            "kept": dg.MetadataValue.int(index.filter(pl.col("status") == "kept").height),
            "excluded_heldout": dg.MetadataValue.int(summary.excluded_heldout),
            "rejection_reasons": dg.MetadataValue.json(dict(reasons)),
            "sources": dg.MetadataValue.json({k: v.model_dump() for k, v in summary.outcomes.items()}),
            "self_proposal": dg.MetadataValue.text(summary.note),
        }
    )


def _history(store, round_key: str, n: int) -> list:
    """Earlier rounds' proposed task sets (local copies) for self-proposal."""
    from touchstone.rounds import earlier_round_keys

    keys = earlier_round_keys(store.round_files(Asset.PROPOSED_TASKS, "index.parquet"), round_key, n)
    return [store.local_dir(Asset.PROPOSED_TASKS, k) for k in keys]


@contextlib.contextmanager
def _proposer(context, config: ProposeConfig, store, policy: PolicyResource, server: PolicyServerResource):
    """The self-proposing Policy (None when self-proposal is off): the round's
    checkpoint, served like raw_trajectories serves it, or `self_policy`."""
    if not config.self_proposals:
        yield None
        return
    from touchstone.agent.plan import checkpoint_policy
    from touchstone.agent.policies import make_policy
    from touchstone.agent.policies.spec import PolicySpec

    start = starting_checkpoint(context.instance, context.partition_key)
    ckpt = store.local_copy(start.path)
    work = store.work_dir(Asset.PROPOSED_TASKS, context.partition_key) / start.checkpoint_hash[:16]
    own_weights = not config.self_policy and policy.spec != "teacher"  # the teacher is served by no server
    serve = server.serving(ckpt, start.checkpoint_hash, work, context.log) if own_weights else None
    with serve or contextlib.nullcontext() as served:
        spec = (
            PolicySpec.parse(config.self_policy) if config.self_policy else checkpoint_policy(policy.spec, ckpt, served)
        )
        context.log.info(f"self-proposal: {config.self_proposals} proposals by {spec}")
        proposer = make_policy(spec, policy.sampling().model_copy(update={"max_tokens": config.self_max_tokens}))
        try:
            yield proposer
        finally:
            proposer.close()
