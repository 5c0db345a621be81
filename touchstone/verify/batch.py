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
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from tqdm import tqdm

from touchstone import atomic, tables
from touchstone.episode.trajectory import read_messages_jsonl
from touchstone.concurrency import bounded_map
from touchstone.tasks.schema import Task, load_task, load_task_set
from touchstone.audit.finding import AuditFinding
from touchstone.verify.report import CheckResult, VerificationReport

REPORTS_FILE, CHECKS_FILE, FINDINGS_FILE = "reports.parquet", "checks.parquet", "findings.parquet"

REPORT_KEYS = ("report_id", "trajectory_id", "task_id")  # the columns that tie a check or finding to its report
# the tables' columns, derived from the report models (`touchstone.tables`); the
# report row also carries the whole report as JSON, which `read_reports` reads
REPORT_SCHEMA = tables.polars_schema(VerificationReport) | {"report_json": pl.String}
CHECK_SCHEMA = {k: REPORT_SCHEMA[k] for k in REPORT_KEYS} | tables.polars_schema(CheckResult)
FINDING_SCHEMA = {k: REPORT_SCHEMA[k] for k in REPORT_KEYS} | tables.polars_schema(AuditFinding)


@dataclass
class BatchItem:
    task_id: str
    trajectory_id: str
    messages: list[dict[str, Any]]
    recorded_diff: dict[str, Any] | None = None


def _items_from_parquet(path: Path, batch_rows: int = 64) -> Iterator[BatchItem]:
    import pyarrow.parquet as pq

    table = pq.ParquetFile(path)
    columns = set(table.schema_arrow.names)
    missing = {"trajectory_id", "task_id", "messages"} - columns
    if missing:
        raise ValueError(f"{path}: missing columns {sorted(missing)} (see docs/formats/trajectory.md)")
    diffs = [f"diff_{k}" for k in ("created", "modified", "deleted")]
    recorded = ["harness_diff"] if "harness_diff" in columns else []  # files written before it: recorded
    wanted = ["task_id", "trajectory_id", "messages", *(diffs if "diff_created" in columns else []), *recorded]
    for batch in table.iter_batches(batch_size=batch_rows, columns=wanted):
        for row in pl.from_arrow(batch).iter_rows(named=True):
            has_diff = "diff_created" in row and row.get("harness_diff", True) is not False
            diff = {d.removeprefix("diff_"): row[d] or [] for d in diffs} if has_diff else None
            yield BatchItem(row["task_id"], row["trajectory_id"], json.loads(row["messages"]), diff)


def iter_items(source: Path) -> Iterator[BatchItem]:
    """Trajectories from a parquet file, a directory holding trajectories.parquet,
    or a directory of `<task id>/<trajectory id>.jsonl` (also below `jsonl/`),
    read one at a time. A source holding none is refused before the first."""
    source = Path(source)
    if source.is_file() and source.suffix == ".parquet":
        return _items_from_parquet(source)
    if (source / "trajectories.parquet").is_file():
        return _items_from_parquet(source / "trajectories.parquet")
    files = sorted(source.rglob("*.jsonl")) if source.is_dir() else []
    if not files:
        raise ValueError(f"{source}: no trajectories.parquet and no <task id>/<trajectory id>.jsonl files")
    return (BatchItem(f.parent.name, f.stem, read_messages_jsonl(f)) for f in files)


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
    task). `options` go to verify_trajectory (replays, progress, backend, policy, full). Trajectories are read as they are
    verified and each report is spooled to a temporary file as it comes, so
    memory does not grow with the number of trajectories."""
    tasks = _tasks(tasks_dir)
    items = iter_items(Path(trajectories)) if isinstance(trajectories, (str, Path)) else trajectories
    with (
        ThreadPoolExecutor(max_workers=max(1, workers)) as pool,
        tempfile.TemporaryFile() as spool,
        tqdm(desc="verify", unit="traj", disable=not progress_bar) as bar,
    ):
        index: list[tuple[str, str, int]] = []  # (task id, trajectory id, offset in the spool)
        for _, fut in bounded_map(
            pool, lambda item: _verify_one(item, tasks, revoked or {}, options), items, 2 * max(1, workers)
        ):
            report = fut.result()
            index.append((report.task_id, report.trajectory_id, spool.tell()))
            spool.write(report.model_dump_json().encode() + b"\n")
            bar.update()
        index.sort()

        def spooled() -> Iterator[VerificationReport]:
            for *_, offset in index:
                spool.seek(offset)
                yield VerificationReport.model_validate_json(spool.readline())

        return stream_reports(spooled, Path(out))


def write_reports(reports: list[VerificationReport], out: Path) -> Path:
    ordered = sorted(reports, key=lambda r: (r.task_id, r.trajectory_id))
    return stream_reports(lambda: ordered, out)


def stream_reports(reports: Callable[[], Iterable[VerificationReport]], out: Path) -> Path:
    """The three report tables of the reports `reports()` yields, in that order
    (called once per table), written a row group at a time."""
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_parquet_rows((_report_row(r) for r in reports()), out / REPORTS_FILE, REPORT_SCHEMA)
    checks = ({**_ids(r), **tables.to_row(c)} for r in reports() for c in r.checks)
    atomic.write_parquet_rows(checks, out / CHECKS_FILE, CHECK_SCHEMA)
    findings = ({**_ids(r), **tables.to_row(f)} for r in reports() for f in r.findings)
    atomic.write_parquet_rows(findings, out / FINDINGS_FILE, FINDING_SCHEMA)
    return out


def _ids(r: VerificationReport) -> dict[str, str]:
    return {k: getattr(r, k) for k in REPORT_KEYS}


def _report_row(r: VerificationReport) -> dict[str, Any]:
    return {**tables.to_row(r), "report_json": r.model_dump_json()}


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
