"""SWE-bench-format instances as Touchstone tasks (docs/ENVIRONMENTS.md#importer).

One task per instance, from a local clone `REPOS/<owner>__<name>` (nothing is
fetched):
- workspace = the repository at `base_commit`, exported without any history
  (later commits would leak the fix) and without the `test_patch` changes;
- hidden_tests = the files `test_patch` adds or changes, after applying it,
  plus the pristine test files the required ids name;
- reference = the files `patch` changes, after applying it;
- required = FAIL_TO_PASS + PASS_TO_PASS; statement = problem_statement;
- environment = the spec `--env-spec` gives for the repo/version, else an
  editable install of the repository with its declared dependencies.
Every task is then validated like any other. An instance that cannot be built
(repo missing, commit unknown, a patch that does not apply, a patch that deletes
files) gets an index row with the reason and no directory: a task is written
in a temporary directory and renamed into place only when complete."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from touchstone.envs.spec import EnvSpec
from touchstone.taskmaking.proposers.common import Candidate, finalize, reject, run_candidates, slug
from touchstone.harness import TestRunResult
from touchstone.tasks.schema import HIDDEN_TESTS, REFERENCE, WORKSPACE, Task, TaskSource, load_task
from touchstone.taskmaking.validate import Validation, ValidationConfig

DEFAULT_ENV = EnvSpec(setup=["pip install -e ."])
# R2E-Gym / other dumps name some fields differently: alias -> SWE-bench name
ALIASES = {
    "repo_name": "repo", "commit_hash": "base_commit", "gold_patch": "patch", "fix_patch": "patch",
    "tests_patch": "test_patch", "fail_to_pass": "FAIL_TO_PASS", "pass_to_pass": "PASS_TO_PASS",
    "f2p": "FAIL_TO_PASS", "p2p": "PASS_TO_PASS", "problem": "problem_statement",
}  # fmt: skip


class InstanceError(ValueError):
    """An instance cannot become a task; `reason` is its index reason."""

    def __init__(self, reason: str, detail: str):
        self.reason = reason
        super().__init__(detail)


class Instance(BaseModel):
    """The SWE-bench fields the importer uses (others are ignored)."""

    model_config = ConfigDict(extra="ignore")

    instance_id: str
    repo: str  # owner/name
    base_commit: str
    patch: str
    test_patch: str
    FAIL_TO_PASS: list[str] = Field(default_factory=list)
    PASS_TO_PASS: list[str] = Field(default_factory=list)
    problem_statement: str
    version: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = {**{ALIASES[k]: v for k, v in data.items() if k in ALIASES and ALIASES[k] not in data}, **data}
        return data

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _json_list(cls, value: Any) -> Any:
        """The public datasets ship these lists as JSON strings."""
        return json.loads(value) if isinstance(value, str) else value

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        return None if value is None else str(value)

    @field_validator("repo")
    @classmethod
    def _repo(cls, value: str) -> str:
        if value.count("/") != 1 or ".." in value:
            raise ValueError(f"repo {value!r} must be 'owner/name'")
        return value


@dataclass
class ImportResult:
    out: Path
    index: Path
    kept: int
    rejected: int


def load_env_specs(path: Path | None) -> dict[str, Any]:
    """--env-spec: {"owner/name": SPEC} or {"owner/name": {"VERSION": SPEC, "*": SPEC}}."""
    if path is None:
        return {}
    raw = json.loads(path.read_text())
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: must hold a JSON object keyed by 'owner/name'")
    return raw


def env_for(specs: dict[str, Any], inst: Instance) -> EnvSpec:
    entry = specs.get(inst.repo)
    if entry is None:
        return DEFAULT_ENV
    if isinstance(entry, dict) and not set(entry) & set(EnvSpec.model_fields):
        entry = entry.get(inst.version or "", entry.get("*"))
        if entry is None:
            return DEFAULT_ENV
    return EnvSpec.model_validate(entry)


def _git(args: list[str], cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, check=False)


def export_commit(clone: Path, commit: str, dest: Path) -> None:
    """The tree of `commit` without history: `git archive` into `dest`."""
    with tempfile.NamedTemporaryFile(suffix=".tar") as tar:
        proc = subprocess.run(
            ["git", "archive", "--format=tar", "-o", tar.name, commit], cwd=clone, capture_output=True, check=False
        )
        if proc.returncode != 0:
            raise InstanceError("bad_commit", f"git archive {commit}: {proc.stderr.decode(errors='replace').strip()}")
        dest.mkdir(parents=True)
        with tarfile.open(tar.name) as archive:
            archive.extractall(dest, filter="data")
    # committed interpreter caches are stale copies of code, not source (and fail the leak check)
    for junk in sorted(dest.rglob("*"), reverse=True):
        if junk.name == "__pycache__" and junk.is_dir():
            shutil.rmtree(junk)
        elif junk.suffix in (".pyc", ".pyo") and junk.is_file():
            junk.unlink()


def changed_files(patch: str, tree: Path) -> tuple[list[str], list[str]]:
    """(files the patch leaves present, files it deletes), as git reads it."""
    proc = _git(["apply", "--numstat", "--summary", "-"], tree, patch.encode())
    if proc.returncode != 0:
        raise InstanceError("patch_does_not_apply", proc.stderr.decode(errors="replace").strip()[-500:])
    present, deleted = [], []
    for line in proc.stdout.decode().splitlines():
        parts = line.split("\t")
        if len(parts) == 3:
            present.append(parts[2])
        elif line.strip().startswith("delete mode"):
            deleted.append(line.strip().split(" ", 3)[-1])
    return [p for p in present if p not in deleted], deleted


def apply(patch: str, tree: Path, what: str) -> None:
    proc = _git(["apply", "--whitespace=nowarn", "-"], tree, patch.encode())
    if proc.returncode != 0:
        raise InstanceError("patch_does_not_apply", f"{what}: {proc.stderr.decode(errors='replace').strip()[-500:]}")


def write_instance_task(
    task_dir: Path, inst: Instance, clone: Path, env: EnvSpec, origin: str
) -> tuple[Task, TestRunResult | None]:
    """Lay out one task in a temporary sibling of `task_dir`, renamed into place at the end."""
    if not clone.is_dir():
        raise InstanceError("repo_missing", f"no local clone {clone} (expected REPOS/<owner>__<name>)")
    staging = Path(tempfile.mkdtemp(prefix=f".{task_dir.name}.importing-", dir=task_dir.parent))
    try:
        work = staging / ".work"
        export_commit(clone, inst.base_commit, work / "base")
        test_files, test_deleted = changed_files(inst.test_patch, work / "base")
        fix_files, fix_deleted = changed_files(inst.patch, work / "base")
        if fix_deleted:
            raise InstanceError("patch_deletes_files", f"the gold patch deletes {fix_deleted[:3]}: a reference cannot")
        shutil.copytree(work / "base", work / "tests", symlinks=True)
        apply(inst.test_patch, work / "tests", "test_patch")
        shutil.copytree(work / "base", work / "fixed", symlinks=True)
        apply(inst.patch, work / "fixed", "patch")
        required = inst.FAIL_TO_PASS + inst.PASS_TO_PASS
        hidden = sorted(
            set(test_files)
            | {r.split("::", 1)[0] for r in required if (work / "tests" / r.split("::", 1)[0]).is_file()}
        )
        for sub, root, files in ((HIDDEN_TESTS, work / "tests", hidden), (REFERENCE, work / "fixed", fix_files)):
            for rel in files:
                (staging / sub / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(root / rel, staging / sub / rel)
        (work / "base").rename(staging / WORKSPACE)
        shutil.rmtree(work)
        task = Task(
            id=task_dir.name, statement=inst.problem_statement, fail_to_pass=inst.FAIL_TO_PASS,
            pass_to_pass=inst.PASS_TO_PASS, timeout_s=300, protected=sorted(set(hidden) | set(test_deleted)),
            environment=env, source=TaskSource(proposer="swebench", origin=origin, unit=inst.instance_id, meta={
                "repo": inst.repo, "base_commit": inst.base_commit, "version": inst.version,
                "instance_id": inst.instance_id}),
        )  # fmt: skip
        task.write(staging)
        shutil.rmtree(task_dir, ignore_errors=True)
        staging.rename(task_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return load_task(task_dir), None


def read_instances(path: Path) -> Iterator[tuple[str, Instance | Validation]]:
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        fallback = f"{slug(path.stem)}-{lineno}"
        try:
            inst = Instance.model_validate(json.loads(line))
        except (json.JSONDecodeError, ValidationError) as exc:
            detail = (
                exc.msg
                if isinstance(exc, json.JSONDecodeError)
                else "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            )
            yield fallback, reject(fallback, "malformed", f"{path}:{lineno}: {detail}")
            continue
        yield slug(inst.instance_id), inst


def _build(task_dir: Path, inst: Instance, repos: Path, specs: dict[str, Any], origin: str):
    try:
        return write_instance_task(task_dir, inst, repos / inst.repo.replace("/", "__"), env_for(specs, inst), origin)
    except InstanceError as exc:
        return reject(task_dir.name, exc.reason, str(exc))


def candidates(path: Path, repos: Path, specs: dict[str, Any]) -> Iterator[Candidate]:
    seen: set[str] = set()
    for task_id, item in read_instances(path):
        while task_id in seen:
            task_id += "-dup"
        seen.add(task_id)
        unit = item.instance_id if isinstance(item, Instance) else task_id
        source = TaskSource(proposer="swebench", origin=path.name, unit=unit)
        if isinstance(item, Validation):
            yield Candidate(task_id, source, lambda _d, v=item: v)
        else:
            yield Candidate(task_id, source, lambda d, i=item: _build(d, i, repos, specs, path.name))


def import_swebench(
    jsonl: Path,
    repos: Path,
    out: Path,
    *,
    env_spec: Path | None = None,
    workers: int = 1,
    cfg: ValidationConfig | None = None,
) -> ImportResult:
    """Import and validate every instance of `jsonl`; OUT/index.parquet has a row per instance."""
    specs = load_env_specs(env_spec)
    rows, kept = run_candidates(
        candidates(jsonl, repos, specs),
        out,
        n=None,
        workers=workers,
        cfg=cfg or ValidationConfig(),
        desc="swe-bench tasks",
    )
    index = finalize(out, rows)
    return ImportResult(out, index, len(kept), len(rows) - len(kept))
