"""Where asset data lives: one directory of Parquet files (or a checkpoint) per
asset and round under a root that may be a local path or an object-store URL
(UPath), plus a DuckDB file with one view per table across all rounds.

Layout: ROOT/rounds/<round>/<asset>/... for partitioned assets, ROOT/<asset>/...
for the others. Writers fill a private staging directory and `publish` swaps it
into place, so a killed run leaves the last good data untouched and a rerun
replaces a partition's files instead of appending to them (no duplicates).
An object store has no rename: there a publish is journaled (ROOT/.publishing/)
while its server-side copies run, readers refuse an asset whose publish is under
way or was cut off, and the next writer of the root finishes it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from urllib.parse import quote

import duckdb
import polars as pl
from upath import UPath

from touchstone import paths
from touchstone.paths import Asset
from touchstone.writer_lock import TOKEN_ENV, DataRootBusy, WriterLock

# DuckDB view name -> (asset, file name inside the asset's directory)
TABLES: dict[str, tuple[str, str]] = {
    "tasks": (Asset.PROPOSED_TASKS, "index.parquet"),
    "trajectories": (Asset.RAW_TRAJECTORIES, "trajectories.parquet"),
    "steps": (Asset.RAW_TRAJECTORIES, "steps.parquet"),
    "reports": (Asset.VERIFICATION_REPORTS, "reports.parquet"),
    "checks": (Asset.VERIFICATION_REPORTS, "checks.parquet"),
    "findings": (Asset.VERIFICATION_REPORTS, "findings.parquet"),
    "canary_reports": (Asset.VERIFICATION_REPORTS, "canaries.parquet"),
    "data_summaries": (Asset.TRAINING_DATA, "summary.json"),
    "sft": (Asset.TRAINING_DATA, "sft.parquet"),
    "rl": (Asset.TRAINING_DATA, "rl.parquet"),
    "dpo": (Asset.TRAINING_DATA, "dpo.parquet"),
    "kto": (Asset.TRAINING_DATA, "kto.parquet"),
    "checkpoints": (Asset.CHECKPOINT, "checkpoint.json"),
    "evaluation": (Asset.ROUND_EVALUATION, "metrics.parquet"),
    "eval_attempts": (Asset.ROUND_EVALUATION, "attempts.parquet"),
}

_STAGING = ".staging"
_WORK = ".work"
# Object stores: one record per publish whose server-side copies are under way (or were cut off)
_PUBLISHING = ".publishing"


class IncompleteAsset(RuntimeError):
    """An asset on an object store whose publish was cut off while its files were copied
    into place: part old, part new, so never read; the next writer finishes the publish."""


class RoundStore:
    """`root`: a local path or an fsspec URL; `storage_options` go to its filesystem
    (s3: key, secret, endpoint_url; empty ones are left to the AWS_* variables)."""

    def __init__(self, root: str | os.PathLike[str], **storage_options: str):
        self.options = {k: v for k, v in storage_options.items() if v}
        self.root = UPath(root, **self.options)

    @property
    def is_local(self) -> bool:
        return self.root.protocol in ("", "file", "local")

    def asset_dir(self, asset: str, round_key: str | None = None) -> UPath:
        return self.root / "rounds" / round_key / asset if round_key else self.root / asset

    def round_files(self, asset: str, filename: str) -> dict[str, UPath]:
        """round key -> the asset's `filename` in that round, for every round that has it."""
        found = {p.parent.parent.name: p for p in self.root.glob(f"rounds/*/{asset}/{filename}")}
        if self.is_local:
            return found
        incomplete = self._incomplete()
        return {key: p for key, p in found.items() if self._rel(p.parent) not in incomplete}

    def local_dir(self, asset: str, round_key: str | None = None) -> Path:
        """A local directory holding the asset's files (downloaded for remote roots)."""
        src = self.asset_dir(asset, round_key)
        if not self.is_local:
            self._refuse_incomplete(src)  # first: a publish cut off before any copy landed leaves no files
        if not src.exists():
            where = f"round {round_key}" if round_key else "this store"
            raise FileNotFoundError(f"{asset} has no data for {where} at {src}: materialize it first")
        if self.is_local:
            return Path(src.path)
        dest = Path(tempfile.mkdtemp(prefix=f"touchstone-{asset}-"))
        _copy_upath(src, UPath(dest))
        return dest

    def write_back(self, asset: str, round_key: str | None, local: Path) -> None:
        """Publish `local`, a `local_dir` of the asset changed in place, as the asset's
        data (on a local root `local_dir` is the data itself: nothing to copy)."""
        if self.is_local:
            return
        with self.publish(asset, round_key) as staging:
            shutil.copytree(local, staging, dirs_exist_ok=True)

    def local_copy(self, location: str) -> str:
        """A local path holding the files at `location` (a path, or a URL in this
        store, e.g. a checkpoint recorded in metadata): downloaded when remote."""
        if not paths.is_url(location):
            return location
        src = UPath(location, **self.options)
        if str(src).startswith(str(self.root)):
            self._refuse_incomplete(src)
        dest = Path(tempfile.mkdtemp(prefix="touchstone-copy-"))
        _copy_upath(src, UPath(dest))
        return str(dest)

    def writer_lock(self, run_id: str | None = None) -> WriterLock:
        """The lock that makes one process at a time the writer of this root. It names the
        Dagster run, so the run's other steps (in other containers under the Docker
        executor, which inherit no environment from the holder) are let through."""
        if self.is_local:
            return WriterLock(self.root.path, run_id=run_id)
        return WriterLock(str(self.root), fs=self.root.fs, run_id=run_id)

    def lock_for_run(self, run_id: str | None) -> WriterLock | None:
        """Take the writer lock for a Dagster run (any entry point: UI, schedule, sensor,
        deployment). None when the run already writes under it: it runs inside the process
        that holds it (`touchstone round run`), or another step of the same run holds it.
        Another writer: DataRootBusy, naming it."""
        lock = self.writer_lock(run_id)
        try:
            lock.acquire()
        except DataRootBusy as busy:
            holder = busy.holder
            if holder and (holder.token == os.environ.get(TOKEN_ENV) or (run_id and holder.run_id == run_id)):
                return None
            raise
        return lock

    def work_dir(self, asset: str, round_key: str | None = None) -> Path:
        """A local directory that survives a killed run, for stages that resume
        (rollouts skip attempts whose record exists). Cleared by `publish`."""
        path = self._work_path(asset, round_key)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _work_path(self, asset: str, round_key: str | None) -> Path:
        if self.is_local:
            return Path(self.asset_dir(asset, round_key).parent.path) / _WORK / asset
        return Path(tempfile.gettempdir()) / "touchstone-work" / (round_key or "shared") / asset

    @contextmanager
    def publish(self, asset: str, round_key: str | None = None) -> Iterator[Path]:
        """Yield an empty local directory; on success it replaces the asset's data."""
        dest = self.asset_dir(asset, round_key)
        if self.is_local:
            staging_root = Path(dest.parent.path) / _STAGING
            staging_root.mkdir(parents=True, exist_ok=True)
            _remove_dead_staging(staging_root, asset)
            staging = staging_root / f"{asset}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            staging.mkdir()
        else:
            staging = Path(tempfile.mkdtemp(prefix=f"touchstone-{asset}-"))
        try:
            yield staging
            if self.is_local:
                _swap_into_place(staging, Path(dest.path))
            else:
                self._upload_into_place(staging, dest)
            shutil.rmtree(self._work_path(asset, round_key), ignore_errors=True)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _upload_into_place(self, staging: Path, dest: UPath) -> None:
        """An object store has no rename: upload everything to a staging prefix first, so an
        upload that fails (the endpoint, the network) leaves the last good data as it was.
        Then journal the publish and replace the data by server-side copies: a failure
        during those leaves the record, so readers refuse the asset and the next writer
        finishes the copies from the complete staged upload (docs/FAULTS.md)."""
        remote = self.root / _STAGING / f"{dest.name}-{uuid.uuid4().hex}"
        try:
            _copy_upath(UPath(staging), remote)
        except BaseException:
            _remove_prefix(remote)
            raise
        record = self._publishing_record(dest)
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"asset": self._rel(dest), "staged": self._rel(remote)}))
        self._copy_into_place(record)

    def _copy_into_place(self, record: UPath) -> None:
        """Replace an asset by its staged upload, as `record` says; idempotent, so an
        interrupted one is simply done again. The record goes only once the copy is whole."""
        publish = json.loads(record.read_text())
        dest, staged = self.root / publish["asset"], self.root / publish["staged"]
        if dest.exists():
            dest.rmdir(recursive=True)
        if staged.exists():  # an empty asset (a warm start of no tasks) uploads nothing
            self.root.fs.copy(staged.path, dest.path, recursive=True)
        record.unlink()
        _remove_prefix(staged)

    def finish_publishes(self) -> list[str]:
        """Finish the publishes a writer left cut off (their server-side copies failed or
        were killed), and drop uploads no publish refers to. Run by whoever takes the writer
        lock, before anything reads: returns the assets finished."""
        if self.is_local:
            return []  # a local publish is one rename: nothing is ever left half done
        records = sorted((self.root / _PUBLISHING).glob("*.json")) if (self.root / _PUBLISHING).exists() else []
        finished = []
        for record in records:
            finished.append(json.loads(record.read_text())["asset"])
            self._copy_into_place(record)
        if (self.root / _STAGING).exists():
            for leftover in (self.root / _STAGING).iterdir():  # uploads of killed or failed publishes
                _remove_prefix(leftover)
        return finished

    def _rel(self, path: UPath) -> str:
        return path.path[len(self.root.path) :].strip("/")

    def _publishing_record(self, dest: UPath) -> UPath:
        return self.root / _PUBLISHING / f"{quote(self._rel(dest), safe='')}.json"

    def _incomplete(self) -> set[str]:
        """The assets (paths below the root) whose publish is under way or was cut off."""
        journal = self.root / _PUBLISHING
        return {json.loads(r.read_text())["asset"] for r in journal.glob("*.json")} if journal.exists() else set()

    def _refuse_incomplete(self, src: UPath) -> None:
        if self._publishing_record(src).exists():
            raise IncompleteAsset(
                f"{self._rel(src)} at {self.root} is incomplete: its publish was cut off while its files were "
                "copied into place; the next writer of the data root finishes it (rerun `touchstone round run`)"
            )

    # --- DuckDB ---------------------------------------------------------------

    @property
    def db_path(self) -> Path:
        """The DuckDB file; always local (DuckDB needs a file it can lock): in the
        root, or in TOUCHSTONE_HOME when the root is an object store."""
        return (Path(self.root.path) if self.is_local else paths.home()) / "touchstone.duckdb"

    def connect(self, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        """A connection to the DuckDB file that can read this store's files
        (object stores through their fsspec filesystem)."""
        con = _open(self.db_path, read_only)
        if not self.is_local:
            con.register_filesystem(self.root.fs)
        return con

    def refresh_views(self) -> list[str]:
        """(Re)create one view per table that has at least one file; returns their names.
        On an object store a view lists its files, leaving out assets whose publish was
        cut off (a glob would read their partial copy)."""
        created = []
        with closing(self.connect()) as con:
            for view, (asset, filename) in TABLES.items():
                files = self.round_files(asset, filename)
                if not files:
                    con.execute(f"DROP VIEW IF EXISTS {view}")
                    continue
                reader = "read_json_auto" if filename.endswith(".json") else "read_parquet"
                pattern = str(self.root / "rounds" / "*" / asset / filename)
                target = f"'{pattern}'" if self.is_local else str([str(files[key]) for key in sorted(files)])
                source = f"{reader}({target}, union_by_name=true, filename=true)"
                columns = {row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
                round_col = "" if "round" in columns else ("regexp_extract(filename, '/rounds/([^/]+)/', 1) AS round, ")
                con.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT {round_col}* EXCLUDE (filename) FROM {source}")
                created.append(view)
        return created


def read_parquet(path: UPath | Path) -> pl.DataFrame:
    """A Parquet file of any store (through its filesystem, so remote roots use the
    same credentials and endpoint as everything else)."""
    with path.open("rb") as handle:
        return pl.read_parquet(handle)


def _open(path: Path, read_only: bool, attempts: int = 20) -> duckdb.DuckDBPyConnection:
    """Open the DuckDB file, waiting while another process holds its lock."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(attempts - 1):
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException:
            time.sleep(0.5)
    return duckdb.connect(str(path), read_only=read_only)  # the last try raises its own error


def _swap_into_place(staging: Path, dest: Path) -> None:
    # Two renames on one filesystem: the old data disappears only after the new
    # data is complete, and readers never see a half-written directory.
    old = staging.parent / f"{staging.name}-old"
    if dest.exists():
        dest.rename(old)
    staging.rename(dest)
    shutil.rmtree(old, ignore_errors=True)


def _remove_dead_staging(staging_root: Path, asset: str) -> None:
    """Drop staging directories left by killed writers (their pid is gone)."""
    for entry in staging_root.glob(f"{asset}-*"):
        pid = entry.name[len(asset) + 1 :].split("-")[0]
        if pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_prefix(prefix: UPath) -> None:
    try:
        prefix.fs.rm(prefix.path, recursive=True)
    except FileNotFoundError:
        pass  # nothing was uploaded there


def _copy_upath(src: UPath, dest: UPath) -> None:
    for path in src.rglob("*"):
        if path.is_file():
            target = dest / path.relative_to(src).as_posix()
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
