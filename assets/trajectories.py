"""raw_trajectories: the round's policy (and, on the CPU default, the teacher)
attempts every proposed task in the sandbox."""

import contextlib
import shutil
from pathlib import Path

import dagster as dg
import polars as pl

from assets._publish import publishing, table_metadata
from orchestration.lineage import lineage_metadata, starting_checkpoint
from orchestration.partitions import round_index, rounds_partitions
from orchestration.policy_server import PolicyServerResource
from orchestration.resources import PolicyResource, RolloutConfig, SandboxResource, StorageResource


def checkpoint_policy(policy: PolicyResource, checkpoint_path: str, served: str | None = None) -> str:
    """The spec that runs the given weights: under `auto` the policy server's
    `openai:URL#HASH` when one serves them, else `hf:PATH`; an explicit spec
    with `{checkpoint}` replaced by the path."""
    if policy.spec == "auto":
        return served or f"hf:{checkpoint_path}"
    return policy.spec.replace("{checkpoint}", checkpoint_path)


def uses_checkpoint(policy: PolicyResource, round_key: str) -> bool:
    """Whether the round's rollouts run the starting checkpoint (not only the teacher)."""
    return policy.spec != "teacher" and not (policy.spec == "auto" and round_index(round_key) == 0)


def round_policies(policy: PolicyResource, round_key: str, checkpoint_path: str, attempts: int,
                   served: str | None = None) -> dict[str, int]:
    """Policy spec -> attempts per task. Under `auto` round 0 runs the teacher;
    later rounds run the starting checkpoint (`served`, when a server runs it)
    plus `teacher_attempts` teacher attempts per task."""
    if not uses_checkpoint(policy, round_key):
        return {"teacher": attempts}
    specs = {checkpoint_policy(policy, checkpoint_path, served): attempts}
    if policy.teacher_attempts and "teacher" not in specs:
        specs["teacher"] = policy.teacher_attempts
    return specs


def merge_tables(parts: list[Path], out: Path) -> None:
    """Concatenate the per-policy trajectories/steps tables into `out`."""
    for name in ("trajectories.parquet", "steps.parquet"):
        frames = [pl.read_parquet(p / name) for p in parts if (p / name).exists()]
        pl.concat(frames, how="diagonal_relaxed").write_parquet(out / name)


@dg.asset(
    partitions_def=rounds_partitions,
    group_name="round",
    deps=["proposed_tasks", "base_model"],
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
    from touchstone.tasks import load_task_set

    store = storage.store()
    round_key = context.partition_key
    start = starting_checkpoint(context.instance, round_key)
    tasks = load_task_set(store.local_dir("proposed_tasks", round_key))
    ckpt = store.local_copy(start.path)
    # Rollouts resume from the work dir: a killed run redoes only unfinished attempts.
    # Keyed by the starting weights, so a resume never reuses another checkpoint's runs.
    work = store.work_dir("raw_trajectories", round_key) / start.checkpoint_hash[:16]
    serve = server.serving(ckpt, start.checkpoint_hash, work, context.log) if uses_checkpoint(policy, round_key) \
        else contextlib.nullcontext()
    with serve as served, publishing(context, storage) as out:
        specs = round_policies(policy, round_key, ckpt, config.attempts, served)
        parts = [rollout(tasks, spec, attempts, work / spec.split(":")[0], policy, sandbox, context.log)
                 for spec, attempts in specs.items()]
        for part in parts:
            shutil.copytree(part, out / part.name)
        merge_tables(parts, out)
    done = store.asset_dir("raw_trajectories", round_key)
    return dg.MaterializeResult(
        metadata={
            **table_metadata(done / "trajectories.parquet"),
            "policies": dg.MetadataValue.json(specs),
            **lineage_metadata(start),
        }
    )


def rollout(tasks, spec: str, attempts: int, out: Path, policy: PolicyResource, sandbox: SandboxResource,
            log) -> Path:
    """`solve` with the resource settings; returns `out`."""
    from touchstone.agent.rollout import solve

    log.info(f"rolling out {spec} on {len(tasks)} tasks x {attempts} attempts into {out}")
    return solve(tasks, spec, attempts=attempts, workers=sandbox.workers, out=out, sampling=policy.sampling(),
                 backend=sandbox.backend, limits=policy.limits(spec), progress=True)
