"""`verify_batch`: verify many trajectories with N workers, write Parquet.

Inputs: a task set (directory of task directories, or one task directory) and
trajectories as `trajectories.parquet` (the agent stage's table form, whose
harness-recorded diff is then checked against the replay), a directory that
holds one, a directory of `<task id>/<trajectory id>.jsonl` files (bring your
own agent), or in-process `BatchItem`s (the round pipeline's canaries).

Outputs (atomic): OUT/reports.parquet (one row per trajectory),
OUT/checks.parquet (one row per check), OUT/findings.parquet (one row per
audit finding). Format: docs/formats/report.md.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import polars as pl
from tqdm import tqdm

from touchstone import atomic
from touchstone.agent.trajectory import read_messages_jsonl
from touchstone.tasks.schema import Task, load_task, load_task_set
from touchstone.verify.report import CheckResult, VerificationReport

REPORTS_FILE, CHECKS_FILE, FINDINGS_FILE = "reports.parquet", "checks.parquet", "findings.parquet"

REPORT_SCHEMA = {
    "report_id": pl.String, "trajectory_id": pl.String, "task_id": pl.String, "task_hash": pl.String,
    "environment_digest": pl.String, "verdict": pl.String, "reasons": pl.List(pl.String), "failed_checks": pl.List(pl.String),
    "n_findings": pl.Int64, "progress": pl.String, "verifier_version": pl.String,
    "duration_s": pl.Float64, "report_json": pl.String,
}  # fmt: skip
CHECK_SCHEMA = {
    "report_id": pl.String, "trajectory_id": pl.String, "task_id": pl.String,
    "name": pl.String, "status": pl.String, "evidence": pl.String,
}  # fmt: skip
FINDING_SCHEMA = {
    "report_id": pl.String, "trajectory_id": pl.String, "task_id": pl.String, "rule": pl.String,
    "severity": pl.String, "step": pl.Int64, "path": pl.String, "line": pl.Int64, "evidence": pl.String,
}  # fmt: skip


@dataclass
class BatchItem:
    task_id: str
    trajectory_id: str
    messages: list[dict[str, Any]]
    recorded_diff: dict[str, Any] | None = None


def _items_from_parquet(path: Path) -> list[BatchItem]:
    df = pl.read_parquet(path)
    missing = {"trajectory_id", "task_id", "messages"} - set(df.columns)
    if missing:
        raise ValueError(f"{path}: missing columns {sorted(missing)} (see docs/formats/trajectory.md)")
    items = []
    for row in df.iter_rows(named=True):
        diff = None
        if "diff_created" in df.columns:
            diff = {k: row.get(f"diff_{k}") or [] for k in ("created", "modified", "deleted")}
        items.append(BatchItem(row["task_id"], row["trajectory_id"], json.loads(row["messages"]), diff))
    return items


def read_items(source: Path) -> list[BatchItem]:
    """Trajectories from a parquet file, a directory holding trajectories.parquet,
    or a directory of `<task id>/<trajectory id>.jsonl` (also below `jsonl/`)."""
    source = Path(source)
    if source.is_file() and source.suffix == ".parquet":
        return _items_from_parquet(source)
    if (source / "trajectories.parquet").is_file():
        return _items_from_parquet(source / "trajectories.parquet")
    files = sorted(source.rglob("*.jsonl")) if source.is_dir() else []
    if not files:
        raise ValueError(f"{source}: no trajectories.parquet and no <task id>/<trajectory id>.jsonl files")
    return [BatchItem(f.parent.name, f.stem, read_messages_jsonl(f)) for f in files]


def _tasks(tasks_dirs: Path | str | list[Path | str]) -> dict[str, Task]:
    """Tasks by id from one or more task(-set) directories (e.g. a round's
    task set plus the canary tasks)."""
    out: dict[str, Task] = {}
    for d in tasks_dirs if isinstance(tasks_dirs, list) else [tasks_dirs]:
        d = Path(d)
        for t in [load_task(d)] if (d / "task.json").is_file() else load_task_set(d):
            out[t.id] = t
    return out


def _verify_one(
    item: BatchItem, tasks: dict[str, Task], revoked: dict[str, str], options: dict[str, Any]
) -> VerificationReport:
    from touchstone.verify.verifier import verify_trajectory

    task = tasks.get(item.task_id)
    if task is None:  # kept as a row, never dropped silently
        why = revoked.get(item.task_id)
        why = f"task {item.task_id!r} was revoked: {why}" if why else f"unknown task id {item.task_id!r}"
        return VerificationReport(
            trajectory_id=item.trajectory_id, task_id=item.task_id, task_hash="",
            checks=[CheckResult(name="task", status="error", evidence=why)],
        )  # fmt: skip
    try:
        return verify_trajectory(task, item.messages, recorded_diff=item.recorded_diff,
                                 trajectory_id=item.trajectory_id, **options)  # fmt: skip
    except Exception as exc:  # a verifier bug must not lose the rest of the batch
        return VerificationReport(
            trajectory_id=item.trajectory_id, task_id=item.task_id, task_hash=task.content_hash,
            checks=[CheckResult(name="verifier", status="error", evidence=f"{type(exc).__name__}: {exc}")],
        )  # fmt: skip


def verify_batch(
    tasks_dir: Path | str | list[Path | str],
    trajectories: Path | str | Iterable[BatchItem],
    workers: int = 1,
    out: Path | str = "verify-out",
    *,
    progress_bar: bool = True,
    revoked: dict[str, str] | None = None,
    **options: Any,
) -> Path:
    """Verify every trajectory; returns OUT. `revoked`: task id -> why, for tasks
    taken out of the set (their trajectories are reported against a revoked
    task). `options` go to verify_trajectory (replays, progress, backend, policy, full)."""
    tasks = _tasks(tasks_dir)
    items = read_items(Path(trajectories)) if isinstance(trajectories, (str, Path)) else list(trajectories)
    reports: list[VerificationReport] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(_verify_one, item, tasks, revoked or {}, options) for item in items]
        for fut in tqdm(
            as_completed(futures), total=len(futures), desc="verify", unit="traj", disable=not progress_bar
        ):
            reports.append(fut.result())
    return write_reports(reports, Path(out))


_atomic_parquet = atomic.write_parquet


def write_reports(reports: list[VerificationReport], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    reports = sorted(reports, key=lambda r: (r.task_id, r.trajectory_id))
    rows, checks, findings = [], [], []
    for r in reports:
        ids = {"report_id": r.report_id, "trajectory_id": r.trajectory_id, "task_id": r.task_id}
        rows.append({
            **ids, "task_hash": r.task_hash, "environment_digest": r.environment_digest, "verdict": r.verdict, "reasons": r.reasons,
            "failed_checks": r.failed_checks(), "n_findings": len(r.findings),
            "progress": None if r.progress is None else json.dumps([p.model_dump() for p in r.progress]),
            "verifier_version": r.verifier_version, "duration_s": r.duration_s, "report_json": r.model_dump_json(),
        })  # fmt: skip
        checks += [{**ids, "name": c.name, "status": c.status, "evidence": c.evidence} for c in r.checks]
        findings += [{**ids, **f.model_dump()} for f in r.findings]
    _atomic_parquet(pl.DataFrame(rows, schema=REPORT_SCHEMA, orient="row"), out / REPORTS_FILE)
    _atomic_parquet(pl.DataFrame(checks, schema=CHECK_SCHEMA, orient="row"), out / CHECKS_FILE)
    _atomic_parquet(pl.DataFrame(findings, schema=FINDING_SCHEMA, orient="row"), out / FINDINGS_FILE)
    return out


def read_reports(out: Path | str) -> list[VerificationReport]:
    """The reports of OUT/reports.parquet, as models, checked against the
    table's `verdict` column: the verdict is re-derived from the checks, and a
    file whose column disagrees has been edited by hand (ValueError)."""
    df = pl.read_parquet(Path(out) / REPORTS_FILE, columns=["report_json", "verdict"])
    reports = [VerificationReport.model_validate_json(s) for s in df["report_json"]]
    for report, verdict in zip(reports, df["verdict"]):
        if verdict != report.verdict:
            raise ValueError(f"{Path(out) / REPORTS_FILE}: report {report.report_id} says {verdict!r} "
                             f"but its checks give {report.verdict!r}")  # fmt: skip
    return reports
