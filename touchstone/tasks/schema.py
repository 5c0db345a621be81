"""The task format: one directory per task, read and checked here.

    TASK_DIR/task.json     metadata (this module's `Task`)
    TASK_DIR/workspace/    what the agent starts with
    TASK_DIR/hidden_tests/ overlaid onto the workspace root at grading time
    TASK_DIR/reference/    optional: overlaid onto the workspace, solves the task

Every stage loads tasks through `load_task`, so a malformed task fails here,
once, with an error that names the file and the problem. Format documented in
docs/formats/task.md.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from touchstone.envs.spec import EnvSpec

TASK_FILE = "task.json"
WORKSPACE = "workspace"
HIDDEN_TESTS = "hidden_tests"
REFERENCE = "reference"
INDEX_FILE = "index.parquet"
# keys of task.json that older proposers wrote and that no longer mean anything:
# read (and dropped) so task sets on disk keep loading; `split` was a train/eval
# split nothing read (held-out tasks are their own set: touchstone/taskmaking/heldout.py)
_RETIRED_KEYS = ("split",)

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class TaskError(ValueError):
    """A task directory is malformed. The message names the file and the problem."""

    def __init__(self, path: Path | str, problem: str):
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}")


def check_relative_path(value: str, what: str) -> str:
    """A path inside a task: relative, POSIX, no `..` (a task never reaches outside itself)."""
    p = PurePosixPath(value)
    if not value or p.is_absolute() or value.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", value):
        raise ValueError(f"{what} {value!r} must be a relative path")
    if ".." in p.parts or "\\" in value:
        raise ValueError(f"{what} {value!r} must not contain '..' or backslashes")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EntryPoint(_Strict):
    """A function under test, used for differential testing against the reference."""

    module: str  # dotted import path, importable from the workspace root
    function: str  # attribute of that module (may be dotted: Class.method)

    @field_validator("module", "function")
    @classmethod
    def _dotted(cls, v: str) -> str:
        if not v or not all(_IDENT_RE.match(part) for part in v.split(".")):
            raise ValueError(f"{v!r} is not a dotted Python name")
        return v


class TaskSource(_Strict):
    """Where a task came from. `unit` is what held-out exclusion matches on: a
    proposed task that shares a unit (the mutated function, the problem) with a
    held-out task never reaches training (`touchstone/taskmaking/heldout.py`)."""

    proposer: Literal["mutation", "problems", "llm", "swebench", "manual"] = "manual"
    origin: str = ""  # seed spec (name==version), JSONL file, policy spec
    unit: str = ""  # source unit: "module:function", problem id, ...
    operator: str | None = None  # mutation operator, when proposer == mutation
    meta: dict[str, Any] = Field(default_factory=dict)


class Task(_Strict):
    id: str
    statement: str
    entry_points: list[EntryPoint] = Field(default_factory=list)
    # pytest node ids relative to the workspace root; None = every collected hidden test
    fail_to_pass: list[str] | None = None
    pass_to_pass: list[str] | None = None
    timeout_s: float = Field(default=60.0, gt=0, le=3600)
    # workspace-relative paths (fnmatch globs) the agent must not change
    protected: list[str] = Field(default_factory=list)
    source: TaskSource = Field(default_factory=TaskSource)
    # packages the task needs (docs/ENVIRONMENTS.md): a spec, or the name of a shared
    # one (environments/NAME.json); None = the base environment
    environment: EnvSpec | str | None = None

    _dir: Path | None = PrivateAttr(default=None)

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not _ID_RE.match(v):
            raise ValueError(f"id {v!r} must match {_ID_RE.pattern} (it names directories and rows)")
        return v

    @field_validator("statement")
    @classmethod
    def _statement(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("statement is empty")
        return v

    @field_validator("fail_to_pass", "pass_to_pass")
    @classmethod
    def _node_ids(cls, v: list[str] | None) -> list[str] | None:
        for node in v or []:
            check_relative_path(node.split("::", 1)[0], "test node id")
        return v

    @field_validator("protected")
    @classmethod
    def _protected(cls, v: list[str]) -> list[str]:
        return [check_relative_path(p, "protected path") for p in v]

    # -- locations -----------------------------------------------------------------
    @property
    def dir(self) -> Path:
        if self._dir is None:
            raise TaskError(self.id, "task was not loaded from a directory")
        return self._dir

    @property
    def workspace_dir(self) -> Path:
        return self.dir / WORKSPACE

    @property
    def hidden_tests_dir(self) -> Path:
        return self.dir / HIDDEN_TESTS

    @property
    def reference_dir(self) -> Path | None:
        ref = self.dir / REFERENCE
        return ref if ref.is_dir() else None

    @property
    def required_tests(self) -> list[str] | None:
        """F2P + P2P node ids, or None when every collected hidden test is required."""
        if self.fail_to_pass is None and self.pass_to_pass is None:
            return None
        return list(self.fail_to_pass or []) + list(self.pass_to_pass or [])

    @property
    def content_hash(self) -> str:
        """sha256 over task.json's content and every file of the task, so any change
        to statement, tests, workspace or reference gives a new hash."""
        h = hashlib.sha256()
        meta = self.model_dump(mode="json")
        if meta["environment"] is None:  # the base environment: hashes as before the field existed
            del meta["environment"]
        h.update(json.dumps(meta, sort_keys=True).encode())
        for sub in (WORKSPACE, HIDDEN_TESTS, REFERENCE):
            root = self.dir / sub
            for rel, digest in tree_digest(root).items():
                h.update(f"\0{sub}/{rel}\0{digest}".encode())
        return h.hexdigest()

    def write(self, task_dir: Path) -> Path:
        """Write task.json into `task_dir` (the files are the caller's business)."""
        task_dir.mkdir(parents=True, exist_ok=True)
        path = task_dir / TASK_FILE
        path.write_text(self.model_dump_json(indent=2, exclude_none=True) + "\n")
        return path


def tree_digest(root: Path) -> dict[str, str]:
    """Relative POSIX path -> sha256 of every regular file below `root` (sorted)."""
    if not root.is_dir():
        return {}
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _field_error(path: Path, exc: ValidationError) -> TaskError:
    problems = []
    known = set(Task.model_fields)
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"])
        if err["type"] == "extra_forbidden" and len(err["loc"]) == 1:
            guess = difflib.get_close_matches(str(err["loc"][0]), known, n=1)
            hint = f" (did you mean {guess[0]!r}?)" if guess else f" (known keys: {', '.join(sorted(known))})"
            problems.append(f"unknown key {loc!r}{hint}")
        else:
            problems.append(f"{loc or 'task'}: {err['msg']}")
    return TaskError(path, "; ".join(problems))


def _check_tree(task_dir: Path, sub: str, required: bool) -> None:
    root = task_dir / sub
    if not root.exists():
        if required:
            raise TaskError(root, f"missing directory {sub}/")
        return
    if not root.is_dir() or root.is_symlink():
        raise TaskError(root, f"{sub} must be a directory")
    resolved_root = root.resolve()
    for p in root.rglob("*"):
        if p.is_symlink():
            target = p.resolve()
            if resolved_root not in target.parents and target != resolved_root:
                raise TaskError(p, "symlink points outside the task")


def load_task(task_dir: Path | str) -> Task:
    """Read and check one task directory. Raises TaskError naming file and problem."""
    task_dir = Path(task_dir)
    if not task_dir.is_dir():
        raise TaskError(task_dir, "not a task directory (does not exist or is not a directory)")
    meta_path = task_dir / TASK_FILE
    if not meta_path.is_file():
        raise TaskError(meta_path, f"missing {TASK_FILE}")
    try:
        raw = json.loads(meta_path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise TaskError(meta_path, f"not UTF-8: {exc}") from None
    except json.JSONDecodeError as exc:
        raise TaskError(meta_path, f"bad JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    if not isinstance(raw, dict):
        raise TaskError(meta_path, "must hold a JSON object")
    for key in _RETIRED_KEYS:
        raw.pop(key, None)
    try:
        task = Task.model_validate(raw)
    except ValidationError as exc:
        raise _field_error(meta_path, exc) from None
    _check_tree(task_dir, WORKSPACE, required=True)
    _check_tree(task_dir, HIDDEN_TESTS, required=True)
    _check_tree(task_dir, REFERENCE, required=False)
    if not any(p.is_file() for p in (task_dir / HIDDEN_TESTS).rglob("*.py")):
        raise TaskError(task_dir / HIDDEN_TESTS, "holds no test file (*.py)")
    task._dir = task_dir.resolve()
    return task


def load_task_set(root: Path | str) -> list[Task]:
    """Every task directory (one holding task.json) below `root`, sorted by id.
    Raises TaskError on the first malformed task and on duplicate ids."""
    root = Path(root)
    if not root.is_dir():
        raise TaskError(root, "task set directory does not exist")
    tasks = [load_task(p.parent) for p in sorted(root.rglob(TASK_FILE)) if _is_task_dir(p.parent, root)]
    seen: dict[str, Path] = {}
    for t in tasks:
        if t.id in seen:
            raise TaskError(t.dir, f"duplicate task id {t.id!r} (also in {seen[t.id]})")
        seen[t.id] = t.dir
    return sorted(tasks, key=lambda t: t.id)


def _is_task_dir(d: Path, root: Path) -> bool:
    # a task.json inside another task's workspace/tests is a file of that task, not a task
    rel_parts = d.relative_to(root).parts
    return not any(part in (WORKSPACE, HIDDEN_TESTS, REFERENCE) or part.startswith(".") for part in rel_parts)
