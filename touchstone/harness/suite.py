"""Run a task's hidden tests on some version of its workspace, in the sandbox:
the one way task validation, the proposers and the verifier grade.

A `HiddenSuite` reads what the runs need from the task once (the hidden test
modules, the test functions they define, the directories to protect); its
`compose` builds the tree to grade on the host with the one tree composer
(`touchstone.harness.tree.compose_tree`), moving the test directories aside so
`run` mounts them read-only over the workspace (code under test cannot rewrite
a test or helper before it is imported); `run` grades run `i` of the plan
(`run_plan(i)`: the hash seed and test order) in a fresh sandbox with the
harness's own ini, plugin and result parser (`touchstone.harness.grading`).
"""

from __future__ import annotations

import copy
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from touchstone.harness import grading
from touchstone.harness.testfiles import is_test_module, outermost_test_dirs, test_dirs
from touchstone.harness.isolation.runner import IsolatedTrees, compose_trees, run_isolated
from touchstone.harness.tree import PatchError, compose_tree
from touchstone.sandbox.environment import Environment


class TaskTests(Protocol):
    """What the harness reads from a task (`touchstone.tasks.Task` has it all)."""

    @property
    def workspace_dir(self) -> Path: ...
    @property
    def hidden_tests_dir(self) -> Path: ...
    @property
    def timeout_s(self) -> float: ...


def own_protocol_of(task: object) -> tuple[str, ...]:
    """The candidate classes whose own protocol (`__eq__`, arithmetic, `in`...)
    the task declares the subject of its tests (`source.meta.oracle.own_protocol`,
    docs/formats/task.md): in an isolated run only their instances decide
    operations in the judge. The verifier validates the declaration with the
    rest of the task's contract (`touchstone.verify.oracle.contract_of`)."""
    meta = getattr(getattr(task, "source", None), "meta", None)
    declared = ((meta or {}).get("oracle") or {}).get("own_protocol") if isinstance(meta, dict) else None
    return tuple(str(c) for c in declared) if isinstance(declared, list) else ()


def run_plan(i: int) -> tuple[int, str]:
    """(PYTHONHASHSEED, test order) of run i: forward, reverse, then shuffles.
    The verifier's first run and determinism re-runs, and validation's
    reference runs, all follow it."""
    return i, ("forward", "reverse")[i] if i < 2 else f"shuffle:{i}"


class HiddenSuite:
    """A task's hidden tests, ready to grade any version of its workspace.
    `required`: node ids that must pass, or None = every hidden test function;
    `environment`: the task's built environment (`touchstone.tasks.environment.task_environment`;
    None: the base one), mounted by every run; `inputs`: data files outside the
    test folders that the tests read (the task's isolation record, from the
    reference's run), served from the pristine workspace read-only in every
    run (in the judge's tree of an isolated run)."""

    def __init__(self, task: TaskTests, required: list[str] | None, environment: Environment | None = None,
                 inputs: Sequence[str] = ()):  # fmt: skip
        self.workspace, self.hidden, self.timeout = task.workspace_dir, task.hidden_tests_dir, task.timeout_s
        self.environment = environment
        hidden = self.hidden
        self.sources = {p.relative_to(hidden).as_posix(): p.read_text() for p in sorted(hidden.rglob("*.py"))}
        self.test_modules = [rel for rel in self.sources if is_test_module(rel)]
        self.required = required
        self.own_protocol = own_protocol_of(task)
        self.inputs = tuple(r for r in inputs if (self.workspace / r).is_file())
        # only the files holding required tests run: same verdict, shorter runs
        self.test_files = sorted({r.split("::", 1)[0] for r in required}) if required else self.test_modules
        self.prefixes = [i for rel in self.test_modules for i in grading.test_functions(rel, self.sources[rel])]
        workspace_files = [p.relative_to(self.workspace).as_posix() for p in self.workspace.rglob("*") if p.is_file()]
        self.readonly_dirs = outermost_test_dirs(test_dirs(workspace_files, self.sources))

    def with_required(self, required: list[str]) -> "HiddenSuite":
        """The same suite grading only `required` (a split task's isolated and in-process parts)."""
        part = copy.copy(self)
        part.required = list(required)
        part.test_files = sorted({r.split("::", 1)[0] for r in required})
        return part

    def compose(
        self,
        dest: Path,
        *,
        overlays: Sequence[Path] = (),
        files: Mapping[str, bytes | str] | None = None,
        deleted: Sequence[str] = (),
        patch: str | None = None,
        with_tests: bool = True,
    ) -> Path:
        """dest/workspace: the tree to grade (see `compose_tree`; without the
        hidden tests when `with_tests` is False); dest/readonly/<dir>: the test
        directories, mounted read-only over it by `run`. Returns dest/workspace."""
        tree = compose_tree(dest / "workspace", self.workspace, overlays=overlays, files=files, deleted=deleted,
                            patch=patch, tests=self.hidden if with_tests else None)  # fmt: skip
        for d in self.readonly_dirs:
            if (tree / d).is_dir():
                (dest / "readonly" / d).parent.mkdir(parents=True, exist_ok=True)
                shutil.move(tree / d, dest / "readonly" / d)
        return tree

    def grade(
        self,
        *,
        overlays: Sequence[Path] = (),
        files: Mapping[str, bytes | str] | None = None,
        deleted: Sequence[str] = (),
        patch: str | None = None,
        run: int = 0,
        backend: str = "auto",
        timeout: float | None = None,
        clock_offset_s: int = 0,
        record_reads: bool = False,
    ) -> grading.TestRunResult:
        """Compose a tree in a scratch directory and grade it once (run `run` of
        the plan); for several runs of one tree, `compose` once, `run` per index.
        A `patch` that does not apply fails the run with git's reason (the
        candidate's outcome): the tree without it is never graded."""
        with tempfile.TemporaryDirectory(prefix="touchstone-run-") as tmp:
            try:
                tree = self.compose(Path(tmp), overlays=overlays, files=files, deleted=deleted, patch=patch)
            except PatchError as exc:
                return grading.TestRunResult("fail", f"{exc}; nothing was graded (never the tree without it)")
            return self.run(tree, run, backend=backend, timeout=timeout, clock_offset_s=clock_offset_s,
                            record_reads=record_reads)  # fmt: skip

    def compose_isolated(
        self,
        dest: Path,
        *,
        overlays: Sequence[Path] = (),
        files: Mapping[str, bytes | str] | None = None,
        deleted: Sequence[str] = (),
    ) -> IsolatedTrees:
        """The judge's and the candidate's trees of an isolated run (`touchstone.harness.isolation`)."""
        merged = {
            p.relative_to(o).as_posix(): p.read_bytes() for o in overlays for p in sorted(o.rglob("*")) if p.is_file()
        }
        merged.update({rel: d.encode() if isinstance(d, str) else d for rel, d in (files or {}).items()})
        trees = compose_trees(self.workspace, merged, list(deleted), self.hidden, dest, self.own_protocol)
        for rel in self.inputs:  # the tests' inputs, as the task ships them, beside the tests
            (trees.judge / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.workspace / rel, trees.judge / rel)
        return trees

    def run_isolated(
        self, trees: IsolatedTrees, i: int = 0, *, backend: str = "auto", timeout: float | None = None,
        observe: bool = False, random_seed: int | None = None,
    ) -> grading.TestRunResult:  # fmt: skip
        """Grade isolated trees with run `i` of `run_plan`: no candidate code in the judging process
        (`observe`, `random_seed`: see `touchstone.harness.isolation.run_isolated`)."""
        seed, order = run_plan(i)
        return run_isolated(trees, self.test_files, self.required, self.prefixes, timeout=timeout or self.timeout,
                            backend=backend, hash_seed=seed, order=order, environment=self.environment,
                            observe=observe, random_seed=random_seed)  # fmt: skip

    def run(
        self, tree: Path, i: int = 0, *, backend: str = "auto", timeout: float | None = None, clock_offset_s: int = 0,
        record_reads: bool = False,
    ) -> grading.TestRunResult:  # fmt: skip
        """Grade a tree made by `compose` with run `i` of `run_plan`
        (`clock_offset_s`: the wall clock that many seconds ahead, libfaketime;
        `record_reads`: list the data files outside the tests that test code reads)."""
        seed, order = run_plan(i)
        ro = tree.parent / "readonly"
        readonly = {d: ro / d for d in self.readonly_dirs if (ro / d).is_dir()}
        # the tests' inputs outside their folders: the pristine files, read-only (code under test cannot rewrite them)
        readonly.update({rel: self.workspace / rel for rel in self.inputs if (tree / rel).is_file()})
        return grading.run_tests(tree, self.test_files, self.required, self.prefixes, readonly=readonly,
                                 timeout=timeout or self.timeout, backend=backend, hash_seed=seed, order=order,
                                 environment=self.environment, clock_offset_s=clock_offset_s,
                                 record_reads=record_reads)  # fmt: skip


def run_hidden_tests(
    task: TaskTests, *, required: list[str] | None, environment: Environment | None = None, **grade: Any
) -> grading.TestRunResult:
    """One graded run: `HiddenSuite(task, required, environment).grade(**grade)`."""
    return HiddenSuite(task, required, environment).grade(**grade)
