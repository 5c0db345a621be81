"""`touchstone propose ...` (make task sets) and `touchstone task ...` (validate / show one task)."""

from __future__ import annotations

import json
import sys
import typing
from pathlib import Path

import click

from cli import options
from touchstone.config import default_of, parameter_default
from touchstone.sandbox import BACKENDS
from touchstone.taskmaking.proposers.llm import propose_llm
from touchstone.taskmaking.proposers.mutation import propose_mutation
from touchstone.taskmaking.proposers.selfplay import PROPOSAL_MAX_TOKENS, Kind, SelfPlayConfig
from touchstone.taskmaking.validate import ValidationConfig

_backend = click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default=None,
    help="sandbox backend for validation (default: auto, the backend grading uses)",
)
_workers = click.option("--workers", type=int, default=2, show_default=True, help="candidates validated in parallel")
_k = options.option_of(ValidationConfig, "k", help="reference runs (seeds/orders differ)")
_threshold = options.option_of(ValidationConfig, "threshold", help="minimum mutation score")
_contamination = click.option(
    "--contamination-set",
    "contamination_sets",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="held-out / benchmark task set or HumanEval/MBPP JSONL to check against (repeatable)",
)


def _warn_eval_fraction(_ctx, _param, value: float | None) -> None:
    if value is not None:
        click.echo("warning: --eval-fraction is ignored: held-out tasks are their own set (heldout_tasks)", err=True)


# proposers once split kept tasks into train/eval; nothing read the split, so the
# option is accepted (hidden, for one release) and does nothing
_retired_eval_fraction = click.option(
    "--eval-fraction", type=float, hidden=True, expose_value=False, callback=_warn_eval_fraction
)


def _proposer_options(fn):
    """The options every proposer and importer shares: workers, backend, k, threshold, --json."""
    for option in (_json, _threshold, _k, _backend, _workers):
        fn = option(fn)
    return fn


def _cfg(backend: str | None, k: int, threshold: float, contamination_sets=()):
    extra = {"backend": backend} if backend else {}
    return ValidationConfig(k=k, threshold=threshold, contamination_sets=list(contamination_sets), **extra)


_json = click.option("--json", "as_json", is_flag=True, help="print the result as one JSON object")


def _summary(out: Path, as_json: bool = False, **facts) -> None:
    """What a proposer did: its own facts (kept, rejected, ...) and the index's counts."""
    from touchstone.taskmaking.index import query

    rows = query(
        out,
        "SELECT status, coalesce(reason, '-'), count(*) FROM tasks GROUP BY ALL ORDER BY 1, 2",
    )
    if as_json:
        tasks = [{"status": s, "reason": r, "count": c} for s, r, c in rows]
        click.echo(json.dumps({**facts, "index": str(out / "index.parquet"), "tasks": tasks}, indent=2, default=str))
        return
    click.echo(", ".join(f"{k} {v}" for k, v in facts.items() if not isinstance(v, (list, dict))))
    for status, reason, count in rows:
        click.echo(f"  {status:9} {reason:18} {count}")
    click.echo(f"index: {out / 'index.parquet'}")


def _env_spec(value: str | None):
    """--env: inline JSON, a spec file, or the name of a shared/shipped spec."""
    from touchstone.envs import EnvSpec, find_named_spec, load_spec_file

    if not value:
        return None
    if value.lstrip().startswith("{"):
        try:
            return EnvSpec.model_validate_json(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--env") from None
    path = Path(value)
    return load_spec_file(path if path.is_file() else find_named_spec(value, Path.cwd()))


@click.group()
def propose() -> None:
    """Propose tasks (every task is validated in the sandbox before it is kept)."""


@propose.command("mutation")
@click.option(
    "--seed",
    "seeds",
    multiple=True,
    help="project directory or pinned PyPI sdist 'name==version#sha256=HEX' (repeatable; default: shipped seeds)",
)
@click.option(
    "--repo",
    "repos",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="a local source tree (git checkout or unpacked sdist) to mutate (repeatable; same as --seed DIR)",
)
@click.option(
    "--env",
    "env_spec",
    help="environment the --repo/--seed projects need: a spec JSON file, "
    "a spec name (environments/NAME.json), or inline JSON",
)
@click.option("--tests", "tests", help="test files that count: a path prefix or glob (e.g. 'tests/')")
@click.option(
    "--operator",
    "operators",
    multiple=True,
    help="kind of bug to inject, e.g. swap_arguments (repeatable; default: every operator; "
    "touchstone.tasks.mutate.OPERATORS)",
)
@click.option("--n", type=int, default=parameter_default(propose_mutation, "n"), show_default=True,
              help="validated tasks to keep")  # fmt: skip
@click.option("--out", type=click.Path(path_type=Path), required=True)
@click.option("--rng-seed", type=int, default=parameter_default(propose_mutation, "rng_seed"), show_default=True)
@_retired_eval_fraction
@_proposer_options
def mutation(
    seeds, repos, env_spec, tests, operators, n, out, rng_seed, workers, backend, k, threshold, as_json
) -> None:
    """Inject one AST-level bug per task into real projects with pytest suites."""
    from touchstone.envs import EnvError
    from touchstone.tasks.seeding import SeedError

    try:
        result = propose_mutation(
            out,
            seeds=[*seeds, *map(str, repos)] or None,
            n=n,
            workers=workers,
            rng_seed=rng_seed,
            cfg=_cfg(backend, k, threshold),
            environment=_env_spec(env_spec),
            tests=tests,
            operators=list(operators),
        )
    except (SeedError, EnvError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    if not as_json:
        for s in result.seeds:
            click.echo(f"seed {s.name}: {'ok' if s.usable else 'SKIPPED'} ({s.detail})")
    seeds = [{"name": s.name, "usable": s.usable, "detail": s.detail} for s in result.seeds]
    _summary(out, as_json, kept=result.kept, rejected=result.rejected, seeds=seeds)
    if result.kept < n:
        click.echo(f"warning: only {result.kept} of {n} requested tasks were kept (candidates ran out)", err=True)


@propose.command("problems")
@click.option("--jsonl", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--out", type=click.Path(path_type=Path), required=True)
@_retired_eval_fraction
@_proposer_options
def problems(jsonl, out, workers, backend, k, threshold, as_json) -> None:
    """Import HumanEval/MBPP-style JSONL (prompt, canonical_solution, test, entry_point)."""
    from touchstone.taskmaking.proposers.problems import import_problems

    result = import_problems(jsonl, out, workers=workers, cfg=_cfg(backend, k, threshold))
    _summary(out, as_json, kept=result.kept, rejected=result.rejected)


@propose.command("llm")
@click.option("--policy", required=True, type=options.POLICY, help="policy spec: teacher, hf:PATH, openai:URL#MODEL")
@click.option("--n", type=int, default=parameter_default(propose_llm, "n"), show_default=True,
              help="proposals to request")  # fmt: skip
@click.option("--attempts", type=int, default=parameter_default(propose_llm, "attempts"), show_default=True,
              help="solver attempts per kept task (learnability)")  # fmt: skip
@click.option(
    "--existing",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    multiple=True,
    help="task sets to deduplicate against (repeatable)",
)
@click.option("--out", type=click.Path(path_type=Path), required=True)
@_proposer_options
def llm(policy, n, attempts, existing, out, workers, backend, k, threshold, as_json) -> None:
    """Ask a policy to propose tasks; validate, dedup, and score learnability."""
    result = propose_llm(
        policy, out, n=n, attempts=attempts, existing=list(existing), workers=workers, cfg=_cfg(backend, k, threshold)
    )
    _summary(out, as_json, kept=result.kept, rejected=result.rejected, rewards=str(result.rewards_path))


@propose.command("self")
@click.option(
    "--policy",
    required=True,
    type=options.POLICY,
    help="the proposing policy: hf:PATH, openai:URL#MODEL, replay:FILE.json",
)
@click.option("--n", type=int, default=8, show_default=True, help="proposals to request")
@options.option_of(SelfPlayConfig, "group_size", help="proposals per prompt")
@options.option_of(SelfPlayConfig, "references", help="pool tasks shown per standalone prompt")
@click.option(
    "--kind",
    "kinds",
    type=click.Choice(typing.get_args(Kind)),
    multiple=True,
    default=default_of(SelfPlayConfig, "kinds"),
    show_default=True,
    help="proposal kinds in turn",
)
@click.option(
    "--pool",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    multiple=True,
    help="task sets to draw references from and deduplicate against (repeatable)",
)
@click.option("--heldout", type=click.Path(exists=True, file_okay=False, path_type=Path), help="held-out task set")
@click.option(
    "--seed", "seeds", multiple=True, help="seed projects a bug proposal rewrites (default: the shipped seeds)"
)
@click.option("--max-tokens", type=int, default=PROPOSAL_MAX_TOKENS, show_default=True,
              help="completion tokens per proposal")  # fmt: skip
@click.option("--out", type=click.Path(path_type=Path), required=True)
@_proposer_options
def self_play(
    policy,
    n,
    group_size,
    references,
    kinds,
    pool,
    heldout,
    seeds,
    max_tokens,
    out,
    workers,
    backend,
    k,
    threshold,
    as_json,
) -> None:
    """Self-play proposals as a round makes them: screened against the held-out set and
    the pool, validated, recorded in OUT/proposals.parquet (docs/formats/task.md)."""
    from touchstone.agent.policies import make_policy
    from touchstone.episode.trajectory import Sampling
    from touchstone.taskmaking.proposers.selfplay import propose_self

    cfg = SelfPlayConfig(n=n, group_size=group_size, references=references, kinds=list(kinds))
    try:
        proposer = make_policy(policy, Sampling(max_tokens=max_tokens))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--policy") from None
    try:
        result = propose_self(
            proposer, out, cfg=cfg, pool=list(pool), heldout=heldout, seeds=list(seeds) or None,
            validation=_cfg(backend, k, threshold, [heldout] if heldout else []), workers=workers,
        )  # fmt: skip
    finally:
        proposer.close()
    _summary(out, as_json, kept=result.kept, rejected=result.rejected, proposals=str(out / "proposals.parquet"))


@click.group()
def task() -> None:
    """Inspect and validate one task directory."""


@task.command("validate")
@click.argument("task_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="print the verdict as JSON (every check with its evidence)")
@_backend
@_k
@_threshold
@_contamination
def validate(task_dir, as_json, backend, k, threshold, contamination_sets) -> None:
    """Exit 0 when the task is kept, 1 when rejected (reason printed), 2 on error."""
    from touchstone.taskmaking.validate import validate_dir

    try:
        verdict = validate_dir(task_dir, _cfg(backend, k, threshold, contamination_sets))
    except Exception as exc:  # noqa: BLE001 - the contract is exit code 2 on any error
        click.echo(f"error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(2)
    if as_json:
        click.echo(verdict.model_dump_json(indent=2))
    else:
        click.echo(f"{verdict.task_id}: {'kept' if verdict.kept else 'rejected: ' + str(verdict.reason)}")
        click.echo(f"  {verdict.detail}")
        for c in verdict.checks:
            click.echo(f"  {c.name:14} {c.status:8} {c.detail[:100]}")
        for w in verdict.warnings:
            click.echo(f"  warning: {w}")
    sys.exit(0 if verdict.kept else 1)


@task.command("show")
@click.argument("task_dir", type=click.Path(path_type=Path))
def show(task_dir) -> None:
    """Print a task's metadata, statement and files."""
    from touchstone.tasks.schema import TaskError, load_task

    try:
        t = load_task(task_dir)
    except TaskError as exc:
        raise click.ClickException(str(exc)) from exc
    meta = t.model_dump(mode="json", exclude={"statement", "pass_to_pass"})
    meta["pass_to_pass"] = f"{len(t.pass_to_pass)} tests" if t.pass_to_pass is not None else None
    meta["content_hash"] = t.content_hash
    click.echo(json.dumps(meta, indent=2))
    click.echo("\nstatement:\n" + t.statement)
    for label, root in (
        ("workspace", t.workspace_dir),
        ("hidden_tests", t.hidden_tests_dir),
        ("reference", t.reference_dir),
    ):
        files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) if root else []
        click.echo(f"\n{label}/ ({len(files)} files): " + ", ".join(files[:20]) + (" ..." if len(files) > 20 else ""))


@click.group("import")
def import_() -> None:
    """Import tasks from formats the field already uses (every task is validated)."""


@import_.command("swe-bench")
@click.argument("instances", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--repos",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    required=True,
    help="directory of local clones named <owner>__<name> (nothing is fetched)",
)
@click.option("--out", type=click.Path(path_type=Path), required=True)
@click.option(
    "--env-spec",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help='JSON {"owner/name": SPEC | {"VERSION": SPEC, "*": SPEC}}; default: pip install -e .',
)
@_retired_eval_fraction
@_proposer_options
def swe_bench(instances, repos, out, env_spec, workers, backend, k, threshold, as_json) -> None:
    """Import SWE-bench-format INSTANCES (JSONL; SWE-smith, SWE-Gym and R2E-Gym field names too)."""
    from touchstone.taskmaking.proposers.swebench import import_swebench

    try:
        result = import_swebench(
            instances,
            repos,
            out,
            env_spec=env_spec,
            workers=workers,
            cfg=_cfg(backend, k, threshold),
        )
    except (ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    _summary(out, as_json, kept=result.kept, rejected=result.rejected)


@import_.command("trajectories")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["openhands", "swe-agent", "openai-jsonl"]), required=True)
@click.option(
    "--tasks",
    "tasks_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    required=True,
    help="task set the runs were made on (ids = the runs' instance ids)",
)
@click.option("--task", "task_id", default=None, help="bind every run to this task id instead")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--json", "as_json", is_flag=True, help="print the import index as JSON")
def trajectories(files, fmt, tasks_dir, task_id, out, as_json) -> None:
    """Import other agents' runs (OpenHands, SWE-agent, OpenAI chat JSONL) as
    trajectories that verify-batch and data build read."""
    from touchstone.agent.importers import TrajectoryImportError, import_trajectories
    from touchstone.episode.trajectory import TrajectoryError
    from touchstone.tasks.schema import TaskError, load_task_set

    try:
        tasks = {t.id: t for t in load_task_set(tasks_dir)}
        index = import_trajectories(list(files), fmt, tasks, out, task_id=task_id)
    except (TrajectoryImportError, TrajectoryError, TaskError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps([r.model_dump() for r in index], indent=2))
        return
    kept = [r for r in index if r.trajectory_id]
    click.echo(
        f"imported {len(kept)} of {len(index)} runs into {out}; unmapped actions: {sum(r.unmapped for r in index)}"
    )
    for r in index:
        if r.skipped:
            click.echo(f"  skipped {r.source}: {r.skipped}")
