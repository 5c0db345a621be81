"""Unpartitioned inputs shared by all rounds: the seed code that proposers
mutate, the base model, and the held-out tasks that evaluation uses and
training never sees."""

import shutil
from pathlib import Path

import dagster as dg
import polars as pl

from orchestration.publishing import publishing, table_metadata
from orchestration.resources import (
    HeldoutConfig,
    SandboxResource,
    SeedsConfig,
    StorageResource,
    TrainerResource,
    WarmStartConfig,
)
from touchstone.paths import WARM_START_DATA, Asset


@dg.asset(group_name="sources", kinds={"python"})
def seed_sources(
    context: dg.AssetExecutionContext, config: SeedsConfig, storage: StorageResource
) -> dg.MaterializeResult:
    """Seed projects (clean source trees with their tests) that the mutation proposer mutates."""
    from touchstone.tasks.seeding import default_seeds, resolve_seed

    with publishing(context, storage) as out:
        seeds = [resolve_seed(s, out) for s in config.seeds] if config.seeds else default_seeds(out)
        held = {s.name for s in seeds if s.name in config.heldout or s.name.split("==")[0] in config.heldout}
        unknown = sorted(set(config.heldout) - {n for s in held for n in (s, s.split("==")[0])})
        if unknown:
            raise dg.Failure(f"seed_sources: heldout names {', '.join(unknown)}, which are not among the seeds")
        if seeds and len(held) == len(seeds):
            raise dg.Failure("seed_sources: every seed is held out; rounds need at least one to propose from")
        rows = [
            {
                "seed": s.name,
                "dir": s.root.relative_to(out).as_posix(),
                "sources": len(s.sources),
                "tests": len(s.tests),
                "environment": s.environment.model_dump_json() if s.environment else None,
                "heldout": s.name in held,
            }
            for s in seeds
        ]
        pl.DataFrame(rows).write_parquet(out / "sources.parquet")
    return dg.MaterializeResult(
        metadata=table_metadata(storage.store().asset_dir(Asset.SEED_SOURCES) / "sources.parquet")
    )


@dg.asset(group_name="sources", deps=[seed_sources, Asset.HELDOUT_TASKS], kinds={"pytorch"}, pool="sandbox")
def base_model(
    context: dg.AssetExecutionContext,
    config: WarmStartConfig,
    storage: StorageResource,
    sandbox: SandboxResource,
    trainer: TrainerResource,
) -> dg.MaterializeResult:
    """The round-0 starting weights: a configured checkpoint as it is, or the default
    tiny model warm-started on verified teacher runs of never-held-out seed tasks
    (training/warm_start.py; `n_tasks: 0` for none; a configured checkpoint too with
    `of_configured_base`)."""
    from touchstone.checkpoint import checkpoint_hash
    from training.model_init import default_model
    from training.model_options import ModelOptionError, resolve_base
    from training.warm_start import rows_of

    try:
        source = str(resolve_base(trainer.base_checkpoint)) if trainer.base_checkpoint else str(default_model())
    except ModelOptionError as exc:
        raise dg.Failure(str(exc)) from exc
    warm = None
    if config.n_tasks and (not trainer.base_checkpoint or config.of_configured_base):
        model, warm = _warm_start(context, config, storage, sandbox, trainer, source)
        source = str(model)
    with storage.store().publish(WARM_START_DATA) as rows:  # empty without a warm start: nothing stale replays
        if warm:
            shutil.copytree(rows_of(Path(source)), rows, dirs_exist_ok=True)
    with publishing(context, storage) as out:
        shutil.copytree(source, out, dirs_exist_ok=True)
        digest = checkpoint_hash(str(out))  # here: the published copy may be remote
    path = storage.store().asset_dir(Asset.BASE_MODEL)
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(path)),
            "checkpoint_hash": dg.MetadataValue.text(digest),
            "source": dg.MetadataValue.text(source),
            **({"warm_start": dg.MetadataValue.json(warm.model_dump())} if warm else {}),
        }
    )


def _warm_start(context, config: WarmStartConfig, storage, sandbox, trainer, source: str):
    from training.warm_start import warm_start

    return warm_start(
        Path(source),
        seeds=storage.seed_dirs(),
        heldout=storage.store().local_dir(Asset.HELDOUT_TASKS),
        trainer_config=trainer.trainer_config(),
        cfg=config.warm_start_config(),
        backend=sandbox.backend,
        workers=sandbox.workers,
        log=context.log.info,
    )


@dg.asset(group_name="sources", deps=[seed_sources], kinds={"python"}, pool="sandbox")
def heldout_tasks(
    context: dg.AssetExecutionContext,
    config: HeldoutConfig,
    storage: StorageResource,
    sandbox: SandboxResource,
) -> dg.MaterializeResult:
    """Validated tasks reserved for evaluation. Rounds never propose tasks from
    their source units, and a blocking check keeps them out of training."""
    from touchstone.taskmaking.contamination import round_sets
    from touchstone.taskmaking.proposers.mutation import propose_mutation
    from touchstone.taskmaking.validate import ValidationConfig

    sets = round_sets(None, config.contamination_sets)  # held-out tasks must not be benchmark problems either
    with publishing(context, storage) as out:
        # Its own RNG stream: round r seeds with r, far below this.
        propose_mutation(
            out,
            seeds=storage.seed_dirs(heldout=True),
            n=config.n_tasks,
            workers=sandbox.workers,
            cfg=ValidationConfig(backend=sandbox.backend, contamination_sets=sets),
            rng_seed=config.rng_seed,
            operators=config.operators,
        )
        if config.level != "site":
            from touchstone.taskmaking.curriculum import show_functions

            show_functions(out, config.level)
    index = storage.store().asset_dir(Asset.HELDOUT_TASKS) / "index.parquet"
    return dg.MaterializeResult(metadata=table_metadata(index))
