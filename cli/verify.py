"""`touchstone verify` and `touchstone verify-batch`: the verifier and auditor.

Exit status of `verify`: 0 accept, 1 reject, 2 inconclusive or error (bad
input included), so shell pipelines can gate on it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cli import options
from touchstone.config import parameter_default
from touchstone.episode.trajectory import TrajectoryError, read_messages_jsonl
from touchstone.tasks.schema import TaskError, load_task
from touchstone.verify.batch import verify_batch as run_batch

EXIT = {"accept": 0, "reject": 1, "inconclusive": 2}


def _audit_rules_option(fn):
    """`--audit-rules FILE`; `--policy FILE` is its deprecated name (for one
    release: "policy" also names the agent's spec)."""
    _file = click.Path(exists=True, dir_okay=False, path_type=Path)
    fn = click.option("--policy", "deprecated_policy", type=_file, hidden=True,
                      help="deprecated name of --audit-rules")(fn)  # fmt: skip
    return click.option("--audit-rules", "audit_rules", type=_file,
                        help="extra audit rules YAML (adds or replaces rules by id)")(fn)  # fmt: skip


def _audit_rules(audit_rules: Path | None, deprecated_policy: Path | None):
    from touchstone.audit.policy import load_policy

    if deprecated_policy is not None:
        click.echo("warning: --policy is deprecated, use --audit-rules", err=True)
        if audit_rules is not None:
            raise click.UsageError("give --audit-rules only (--policy is its deprecated name)")
    return load_policy(audit_rules or deprecated_policy)


@click.command()
@click.argument("task_dir", type=click.Path(path_type=Path))
@click.argument("trajectory", type=click.Path(path_type=Path), required=False)
@click.option(
    "--patch",
    "patch_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="grade a unified diff (a SWE-bench model_patch) as a one-step trajectory, instead of TRAJECTORY",
)
@click.option("--json", "as_json", is_flag=True, help="print the full report as JSON")
@options.replays(help="k of k test runs")
@click.option("--progress", is_flag=True, help="per-step share of hidden tests passing (credit assignment)")
@options.backend
@_audit_rules_option
@click.option("--full", is_flag=True, help="run every check even after a cheap one rejected")
def verify(
    task_dir, trajectory, patch_file, as_json, replays, progress, backend, audit_rules, deprecated_policy, full
) -> None:
    """Verify one TRAJECTORY (JSONL of OpenAI chat messages) of the task in TASK_DIR,
    or a patch (--patch FILE.diff)."""
    from touchstone.verify.patch import patch_trajectory
    from touchstone.verify.verifier import verify_trajectory

    if (trajectory is None) == (patch_file is None):
        click.echo("error: give either TRAJECTORY or --patch FILE", err=True)
        sys.exit(2)
    try:
        task = load_task(task_dir)
        if patch_file is not None:
            # its exact bytes: read_text would turn \r\n and lone \r into \n
            messages = patch_trajectory(task, patch_file.read_bytes().decode("utf-8"))
        else:
            messages = read_messages_jsonl(trajectory)
        policy = _audit_rules(audit_rules, deprecated_policy)
    except (TaskError, TrajectoryError, ValueError, OSError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    report = verify_trajectory(task, messages, replays=replays, progress=progress, backend=backend,
                               trajectory_id=(trajectory or patch_file).stem, policy=policy, full=full)  # fmt: skip
    if as_json:
        click.echo(report.model_dump_json(indent=2))
    else:
        click.echo(f"{report.verdict}  task={report.task_id}  trajectory={report.trajectory_id}")
        for c in report.checks:
            click.echo(f"  {c.status:8s} {c.name:16s} {c.evidence[:160]}")
        for f in report.findings:
            click.echo(f"  finding  {f.rule} ({f.severity}) step={f.step}: {f.evidence[:160]}")
    sys.exit(EXIT[report.verdict])


@click.command("verify-batch")
@click.option("--tasks", "tasks_dir", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--trajectories",
    required=True,
    type=click.Path(exists=True, path_type=Path),
    help="trajectories.parquet, a directory holding it, or <task id>/<trajectory id>.jsonl files",
)
@click.option(
    "--workers", default=parameter_default(run_batch, "workers"), show_default=True, type=click.IntRange(min=1)
)
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path))
@options.replays()
@click.option("--progress", is_flag=True, help="per-step share of hidden tests passing")
@options.backend
@_audit_rules_option
def verify_batch(
    tasks_dir, trajectories, workers, out, replays, progress, backend, audit_rules, deprecated_policy
) -> None:
    """Verify many trajectories; writes OUT/reports.parquet, checks.parquet, findings.parquet."""
    from touchstone.verify.batch import read_reports

    try:
        path = run_batch(tasks_dir, trajectories, workers, out, replays=replays, progress=progress,
                         backend=backend, policy=_audit_rules(audit_rules, deprecated_policy))  # fmt: skip
    except (TaskError, TrajectoryError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    counts: dict[str, int] = {}
    for r in read_reports(path):
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    click.echo(
        f"{sum(counts.values())} reports in {path} ({', '.join(f'{k}: {v}' for k, v in sorted(counts.items()))})"
    )
