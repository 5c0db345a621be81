"""`touchstone round ...` and `touchstone db`: register and run rounds on the
Dagster instance in DAGSTER_HOME, and query the data across rounds.

Dagster is imported inside the commands: the domain library never needs it."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

import click

from touchstone import paths
from touchstone.paths import Asset
from cli.errors import debugging, storage_errors, storage_problem


_WRITTEN_BY_US = "# written by touchstone"
LOCAL_INSTANCE = f"""{_WRITTEN_BY_US}: a local instance (SQLite under this folder)
telemetry:
  enabled: false
concurrency:
  runs:
    tag_concurrency_limits:
      # Rounds are sequential: a backfill of several rounds (from the UI) runs them one after another.
      - key: dagster/backfill
        value: {{applyLimitPerUniqueValue: true}}
        limit: 1
      # One writer per data root: the sources and round jobs run one at a time, whoever launched
      # them (UI, schedule, sensor); the data root's writer lock refuses any other writer.
      - key: touchstone/writer
        limit: 1
"""


def _instance():
    """The persistent instance of DAGSTER_HOME (default TOUCHSTONE_HOME/dagster_home).
    A dagster.yaml this command wrote earlier is brought up to date; the user's own is kept."""
    import dagster as dg

    if not os.environ.get("DAGSTER_HOME"):
        home = paths.home() / "dagster_home"
        os.environ["DAGSTER_HOME"] = str(home)
        click.echo(f"DAGSTER_HOME is not set; using {home} (export it for the dagster CLI)", err=True)
    home = Path(os.environ["DAGSTER_HOME"])
    config = home / "dagster.yaml"
    try:
        home.mkdir(parents=True, exist_ok=True)
        if not config.exists() or (
            config.read_text().startswith(_WRITTEN_BY_US) and config.read_text() != LOCAL_INSTANCE
        ):
            config.write_text(LOCAL_INSTANCE)
    except OSError as exc:
        raise click.ClickException(
            f"DAGSTER_HOME={home}: cannot write the Dagster instance there ({exc.strerror or exc}); "
            "export DAGSTER_HOME as a directory you can write"
        ) from None
    return dg.DagsterInstance.get()


@click.group("round")
def round_() -> None:
    """Register, list and run rounds (Dagster partitions r000, r001, ...)."""


@round_.command("new")
@click.option("--key", default=None, help="Round key to register (default: the next one, e.g. r003).")
def new(key: str | None) -> None:
    """Register the next round's partition key on the instance; prints the key."""
    from orchestration.partitions import register_round

    try:
        click.echo(register_round(_instance(), key))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--key") from None


@round_.command("list")
@click.option("--json", "as_json", is_flag=True, help="print the rounds as a JSON list")
def list_rounds(as_json: bool) -> None:
    """Registered rounds and which of their stages are materialized."""
    import dagster as dg

    from orchestration.lineage import latest_metadata
    from orchestration.partitions import registered_rounds
    from orchestration.runner import ROUND_STAGES

    instance = _instance()
    rounds = [
        {
            "round": key,
            "materialized": [s for s in ROUND_STAGES if latest_metadata(instance, dg.AssetKey(s), key)],
            **_promotion(instance, key),
        }
        for key in registered_rounds(instance)
    ]
    if as_json:
        click.echo(json.dumps(rounds, indent=2))
        return
    if not rounds:
        click.echo("no rounds yet: `touchstone round run --rounds 1` (or `touchstone round new`) starts one")
    for r in rounds:
        gate = ""
        if "pass_at_1" in r:
            verdict = "promoted" if r["promoted"] else f"not promoted (keeps {r['next_checkpoint_round']})"
            gate = f"  pass@1={r['pass_at_1']:.3f} {verdict} -> next round starts from {r['next_checkpoint_round']}"
        elif "next_checkpoint_round" in r:  # trained nothing: nothing was evaluated
            gate = f"  {r['promotion_reason']} -> next round starts from {r['next_checkpoint_round']}"
        click.echo(f"{r['round']}  {len(r['materialized'])}/{len(ROUND_STAGES)}  {' '.join(r['materialized'])}{gate}")


def _promotion(instance, key: str) -> dict:
    """The promotion gate's verdict (round_evaluation metadata): which checkpoint the next round starts from."""
    import dagster as dg

    from orchestration.lineage import latest_metadata

    found = latest_metadata(instance, dg.AssetKey(Asset.ROUND_EVALUATION), key)
    if not found or "next_checkpoint_round" not in found[0]:
        return {}
    keys = ("pass_at_1", "promoted", "next_checkpoint_round", "next_checkpoint_hash", "promotion_reason")
    return {k: found[0][k] for k in keys if k in found[0]}  # no pass@1: the round made no update


@round_.command("study")
@click.argument("homes", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="where study.md, study.json, rises.json, controls.json and study.png go")  # fmt: skip
def study(homes: tuple[Path, ...], out: Path) -> None:
    """Several runs of one recipe side by side (e.g. `make smollm2 SEED=...`'s data roots): each
    run's held-out pass@1 / pass@k from the base through its rounds to its control arms, the
    mean over runs per stage, then, paired over tasks, each run's last round minus its base and
    the loop minus its control arms."""
    from touchstone.evaluate.study import write_study

    try:
        click.echo(write_study(list(homes), out))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


@round_.command("run")
@click.option(
    "--rounds",
    "n_rounds",
    default=1,
    show_default=True,
    type=click.IntRange(min=0),
    help="How many rounds to run: an unfinished latest round first, then new ones (0, with --control: none, "
    "only the latest finished round's control arm).",
)
@click.option(
    "--key",
    default=None,
    help="Run (or rerun) this round instead of new ones (with --rounds 0 --control: its control).",
)
@click.option(
    "-c",
    "--config",
    "config_paths",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    multiple=True,
    help="Run config YAML (ops: and resources:, as in the launchpad), e.g. orchestration/deploy/local-served.yaml; "
    "repeat it to lay one over another (later files win, mappings merge), e.g. a recipe and then where it runs.",
)
@click.option(
    "--total",
    is_flag=True,
    help="--rounds counts the data root's finished rounds, not this run's: run until it holds that many "
    "(rerun after an interrupt, `make smollm2` finishes its 3 rounds instead of adding 3 more).",
)
@click.option("--wait", is_flag=True, help="If another process writes the data root, wait for it instead of refusing.")
@click.option(
    "--control",
    is_flag=True,
    help="After the rounds, the last one's control arm (asset control_evaluation): the base trained as many "
    "steps on the first trained round's data alone, evaluated on the same held-out tasks and compared with the round.",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=None,
    help="One seed for the run's sampling and training (over the config's); attempt i samples with seed + i, "
    "so a study's seeds should lie further apart than its attempts (e.g. 0, 1000, 2000).",
)
@click.pass_context
def run(
    ctx: click.Context,
    n_rounds: int,
    key: str | None,
    config_paths: tuple[Path, ...],
    total: bool,
    wait: bool,
    control: bool,
    seed: int | None,
) -> None:
    """Materialize the shared sources if needed, then whole rounds, one run each.
    One writer per data root: a second one is refused (or waits, --wait).
    Ctrl-C or SIGTERM stops the round's sandboxes and children; rerun to resume."""
    from rich.console import Console

    from orchestration.definitions import validate_run_config
    from orchestration.run_config import RunConfigError, configured_store, load_run_configs, with_seed
    from touchstone.interrupts import InterruptGuard

    try:
        run_config = load_run_configs(list(config_paths))
        if seed is not None:
            run_config = with_seed(run_config, seed)
        validate_run_config(run_config)
        store = configured_store(run_config)
    except RunConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--config") from None
    if key is not None:
        _check_round_key(key)
        if total:
            raise click.BadParameter(
                "--key names one round and --total counts them all: give one", param_hint="--total"
            )
    if n_rounds == 0 and not control:
        raise click.BadParameter("0 rounds runs nothing; add --control for the latest finished round's control arm")
    if not debugging(ctx):  # the cause is summarised below, first; --debug shows Dagster's own log
        run_config = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}, **run_config}
    console = Console(stderr=True)
    where = {"stage": "while starting"}
    guard = InterruptGuard(lambda name: click.echo(f"\ninterrupted ({name}) {where['stage']}: stopping its sandboxes "
                                                   "and children; `touchstone round run` resumes it", err=True))  # fmt: skip
    try:
        with guard, _writer(store, wait):  # the guard first: a writer waiting (--wait) can be stopped too
            instance = _instance()
            to_run = min(n_rounds, 1) if key else _still_to_run(instance, n_rounds) if total else n_rounds
            last = _run_rounds(instance, to_run, key, run_config, console, guard, where)
            if control:  # --total with no round left: a finished study's control arm is not run again
                _run_control(instance, last, run_config, console, guard, where, again=not (total and to_run == 0))
    except KeyboardInterrupt:
        if guard.signum is None:  # before the guard was listening
            click.echo("\ninterrupted while starting; nothing was running yet", err=True)
            sys.exit(130)
    if guard.signum is not None:
        sys.exit(guard.code)


def _still_to_run(instance, total: int) -> int:
    """How many rounds `--rounds total --total` runs: those the data root's finished ones fall short by."""
    from orchestration.lineage import evaluated_rounds

    return max(0, total - len(evaluated_rounds(instance)))


def _run_rounds(instance, n_rounds: int, key: str | None, run_config: dict, console, guard, where: dict) -> str:
    """Run the rounds; returns the last one's key (none run: the latest finished round, else the
    latest registered one: an unfinished round has no evaluation to control)."""
    from orchestration.lineage import evaluated_rounds, unfinished_round
    from orchestration.partitions import register_round, registered_rounds
    from orchestration.runner import ensure_sources, failed_checks, run_round

    where["stage"] = "in the shared sources"
    result = ensure_sources(instance, console=console, run_config=run_config)
    if result is not None and not result.success:
        _stop(guard, "sources failed", result)
    round_key = key or (evaluated_rounds(instance) or registered_rounds(instance) or [""])[-1]
    for _ in range(n_rounds):
        round_key = register_round(instance, key or unfinished_round(instance))
        where["stage"] = f"in round {round_key}"
        result = run_round(instance, round_key, console=console, run_config=run_config)
        if failed_checks(result):
            _stop(guard, "round stopped before training by blocking checks", result)
        if not result.success:
            _stop(guard, "round failed", result)
        _say_no_update(instance, result, console)
    return round_key


def _run_control(
    instance, round_key: str, run_config: dict, console, guard, where: dict, *, again: bool = True
) -> None:
    """Materialize `round_key`'s control arm and print its verdict; `again` False: one already
    materialized is kept, and its verdict printed."""
    import dagster as dg

    from orchestration.lineage import latest_metadata
    from orchestration.runner import materialize

    if not round_key:
        raise click.ClickException("no round to control yet: run rounds first (`touchstone round run`)")
    skip = no_control_reason(instance, round_key)
    if skip:
        console.print(skip)
        return
    found = None if again else latest_metadata(instance, dg.AssetKey(Asset.CONTROL_EVALUATION), round_key)
    if found:
        console.print(f"round {round_key}'s control arm is already done (`--rounds 0 --control` reruns it):")
    else:
        where["stage"] = f"in round {round_key}'s control arm"
        result = materialize(
            instance, [Asset.CONTROL_EVALUATION], partition_key=round_key, console=console, run_config=run_config
        )
        if not result.success:
            _stop(guard, "control arm failed", result)
        found = latest_metadata(instance, dg.AssetKey(Asset.CONTROL_EVALUATION), round_key)
    console.print(found[0]["comparison"] if found else f"round {round_key}: control arm done")


def no_control_reason(instance, round_key: str) -> str | None:
    """Why a round has no control arm to run (it made no update: there is no new checkpoint to
    compare), naming the round that has one; None when it can be run. Not a failure: a study
    whose rounds trained nothing has finished."""
    import dagster as dg

    from orchestration.lineage import latest_metadata

    found = latest_metadata(instance, dg.AssetKey(Asset.ROUND_EVALUATION), round_key)
    if found is None or found[0].get("updated") is not False:
        return None
    kept = str(found[0].get("next_checkpoint_round", round_key))
    if kept == round_key:
        return f"round {round_key} made no update and no round before it trained: no control arm to run"
    return (f"round {round_key} made no update (it kept round {kept}'s weights): no control arm for it; "
            f"`touchstone round run --rounds 0 --control --key {kept}` runs round {kept}'s")  # fmt: skip


def _stop(guard, what: str, result) -> None:
    """A failed run: its causes, first, in a few lines; an interrupted one was said already."""
    if guard.signum is not None:
        raise KeyboardInterrupt
    sys.exit(_failure(what, result))


def _check_round_key(key: str) -> None:
    from touchstone.rounds import round_index

    try:
        round_index(key)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--key") from None


@contextlib.contextmanager
def _writer(store, wait: bool):
    """Hold the data root's writer lock; this process's runs and children write under it."""
    from touchstone.writer_lock import TOKEN_ENV, DataRootBusy

    lock = store.writer_lock()
    try:
        lock.acquire(
            wait=wait,
            on_wait=lambda h: click.echo(
                f"waiting: data root {lock.root} is being written by {h.describe() if h else 'another process'}",
                err=True,
            ),  # fmt: skip
        )
    except DataRootBusy as busy:
        raise click.ClickException(str(busy)) from None
    except storage_errors() as exc:
        raise click.ClickException(storage_problem(lock.root, exc)) from None
    if lock.took_over:
        click.echo(f"taking over the data root from a writer that is gone: {lock.took_over.describe()}", err=True)
    for asset in store.finish_publishes():  # before anything reads it (object stores: docs/FAULTS.md)
        click.echo(f"finished the publish of {asset} that an earlier writer left cut off", err=True)
    os.environ[TOKEN_ENV] = lock.me.token
    try:
        yield lock
    finally:
        os.environ.pop(TOKEN_ENV, None)
        lock.release()


def _say_no_update(instance, result, console) -> None:
    """A round that trained nothing finishes, but never silently."""
    import dagster as dg

    from orchestration.lineage import latest_metadata

    key = result.dagster_run.tags.get("dagster/partition")
    found = latest_metadata(instance, dg.AssetKey(Asset.ROUND_EVALUATION), key) if key else None
    if found and found[0].get("updated") is False:
        console.print(f"[yellow]round {key}: {found[0]['promotion_reason']}[/]")


def _failure(what: str, result) -> str:
    """The cause first (the innermost error of a failed step, a failed check's evidence),
    then any others, then where the whole log is."""
    from orchestration.runner import describe_failures

    causes = describe_failures(result) or ["no failed step or check was recorded"]
    more = "".join(f"\n  {cause}" for cause in causes[1:])
    return (
        f"{what}: {causes[0]}{more}\n"
        f"(run {result.run_id}: `make ui` shows it; `touchstone --debug round run` prints Dagster's log)"
    )


@click.command("db")
@click.argument("sql", required=False)
def db(sql: str | None) -> None:
    """Refresh the DuckDB views across rounds; run SQL, or open a SQL prompt."""
    from orchestration.resources import StorageResource

    import duckdb

    store = StorageResource().store()
    try:
        views = store.refresh_views()
    except storage_errors() as exc:
        raise click.ClickException(storage_problem(str(store.root), exc)) from None
    con = store.connect()
    if sql:
        con.sql(sql).show(max_width=200)
        return
    click.echo(f"{store.db_path}  views: {', '.join(views) or '(none yet)'}")
    click.echo("SQL ending with ';' (e.g. SELECT round, count(*) FROM sft GROUP BY ALL;), Ctrl-D to quit")
    buffer = ""
    while True:
        try:
            buffer += input("... " if buffer else "touchstone> ") + "\n"
        except EOFError:
            return
        if buffer.rstrip().endswith(";"):
            try:
                con.sql(buffer).show(max_width=200)
            except duckdb.Error as exc:
                click.echo(f"error: {exc}", err=True)
            buffer = ""
