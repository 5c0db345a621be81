"""Run a task's hidden tests on some version of its workspace, in the sandbox.

Task validation grades exactly as the verifier does: the verifier's harness
(touchstone/verify/harness: its own ini, result plugin, clean environment) and
its result parser (`touchstone.verify.grading.evaluate`). A run tree is
composed on the host (workspace, then overlays such as the reference or a
mutant, then the hidden tests on top) and copied into a fresh sandbox.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from touchstone.envs.task import task_environment
from touchstone.sandbox import Limits, open_sandbox
from touchstone.tasks.schema import Task
from touchstone.verify import grading

_E_LINE = re.compile(r"^E\s+(.*)$")


@dataclass
class HiddenRun:
    passed: list[str]
    failed: dict[str, str]  # node id -> why (the assertion message when there is one)
    wall_s: float
    timed_out: bool
    evidence: str
    collected: list[str] = field(default_factory=list)
    collect_errors: dict[str, str] = field(default_factory=dict)  # file -> error lines

    @property
    def ok(self) -> bool:
        return not self.failed and not self.timed_out and bool(self.passed)


def hidden_test_files(hidden_dir: Path) -> list[str]:
    """Test files of a hidden_tests/ tree (conftest/__init__ are support files)."""
    return sorted(p.relative_to(hidden_dir).as_posix() for p in hidden_dir.rglob("*.py")
                  if p.name.startswith("test_") or p.name.endswith("_test.py"))


def compose(dest: Path, workspace: Path, overlays: dict[str, bytes | str] | None, hidden: Path,
            patch: str | None = None) -> Path:
    """dest = workspace + overlays (relative path -> content) + an agent's patch +
    hidden tests on top (last, so nothing can replace them)."""
    shutil.copytree(workspace, dest, symlinks=True)
    for rel, data in (overlays or {}).items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)
    if patch and patch.strip():
        # git apply refuses paths outside dest; a patch that does not apply leaves the workspace as it was
        subprocess.run(["git", "apply", "--whitespace=nowarn", "-"], input=patch.encode(), cwd=dest,
                       capture_output=True, check=False)
    shutil.copytree(hidden, dest, dirs_exist_ok=True)
    return dest


def reference_overlay(task: Task) -> dict[str, bytes]:
    ref = task.reference_dir
    if ref is None:
        return {}
    return {p.relative_to(ref).as_posix(): p.read_bytes() for p in sorted(ref.rglob("*")) if p.is_file()}


def _error_lines(longrepr: str) -> str:
    """The `E ...` lines of a pytest failure: what behaviour was wrong."""
    lines = [m.group(1) for line in longrepr.splitlines() if (m := _E_LINE.match(line))]
    return "\n".join(lines[:6])


def _messages(phases: dict[str, dict], failed: dict[str, str]) -> dict[str, str]:
    """The parser's one-line reasons, replaced by the failure's `E` lines when it has them."""
    out = dict(failed)
    for nodeid in failed:
        for rec in (phases.get(nodeid) or {}).values():
            if isinstance(rec, dict) and rec.get("outcome") == "failed":
                if lines := _error_lines(str(rec.get("longrepr", ""))):
                    out[nodeid] = lines
                    break
    return out


def run_tests(task: Task, overlays: dict[str, bytes | str] | None = None, *, required: list[str] | None,
              hash_seed: int = 0, order: str = "forward", timeout: float | None = None,
              backend: str = "auto", patch: str | None = None, clock_offset_s: int = 0) -> HiddenRun:
    """One harness run of the task's hidden tests on workspace + overlays (+ patch).
    `required`: node ids that must pass, or None = every hidden test function.
    `clock_offset_s`: run with the wall clock that many seconds ahead (libfaketime)."""
    timeout = timeout or task.timeout_s
    environment = task_environment(task)
    files = hidden_test_files(task.hidden_tests_dir)
    prefixes = [pid for f in files for pid in grading.test_functions(f, (task.hidden_tests_dir / f).read_text())]
    with tempfile.TemporaryDirectory(prefix="touchstone-run-") as tmp, \
            grading.harness_mounts(("pytest_plugin.py", "th_{nonce}.py")) as (h_dir, o_dir, mounts, out, nonce):
        tree = compose(Path(tmp) / "tree", task.workspace_dir, overlays, task.hidden_tests_dir, patch)
        spec = grading.TestRunSpec(test_files=files, plugin_module=f"th_{nonce}", harness_dir=h_dir, out_dir=o_dir,
                                   hash_seed=hash_seed, order=order,
                                   env=grading.faketime_env(h_dir, clock_offset_s) if clock_offset_s else {})
        if clock_offset_s:
            lib = grading.faketime_library()
            if lib is None:
                raise RuntimeError("a shifted clock needs libfaketime (apt-get install libfaketime)")
            shutil.copyfile(lib, mounts[0].host / grading.FAKETIME_LIB)
        captured = Path(tmp) / "captured-results.jsonl"  # the verifier's live-drained result stream
        with grading.StreamCapture(out / grading.RESULTS_FILE, captured):
            with open_sandbox(tree, backend=backend, limits=Limits(timeout_s=timeout + 30), mounts=mounts,
                              environment=environment) as sb:
                result = sb.exec(spec.command(), timeout=timeout)
        graded = grading.evaluate(captured, out / grading.JUNIT_FILE, required, prefixes)
        stream = grading._read_stream(captured)  # for the failure messages the verdict leaves out
        return HiddenRun(passed=graded.passed, failed=_messages(stream.phases, graded.failed), wall_s=result.wall_s,
                         timed_out=result.timed_out, evidence=graded.evidence, collected=stream.collected or [],
                         collect_errors={k: _error_lines(v) or v.strip()[-300:] for k, v in stream.collect_errors.items()})
