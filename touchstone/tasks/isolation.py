"""Does a task's test suite run isolated? Decided once per task, by its reference.

    verdict = probe_isolation(task, backend)   # the reference, graded isolated once; a decided
                                               # verdict is recorded in TASK_DIR/isolation.json
    record_isolation(task, verdict)            # (outside the hashed content; record=False: don't)
    recorded_isolation(task) -> IsolationVerdict | None   # None: never probed, or the task or the
                                                          # isolation harness changed since

A task is `isolated` when its reference passes every required hidden test in
an isolated run: then a candidate's failure there is the candidate's, and the
verifier grades that task isolated only. It is `split` when the reference
fails isolated only tests that already pass before the fix (pass-to-pass
tests that introspect a module's namespace, pickle judge objects, ...) and
passes every fail-to-pass test isolated: the verifier then grades those
`in_process` tests in process and every other required test isolated only, so
what shows the fix is judged where candidate code cannot reach. Otherwise it
is `not_isolated` (the tests that show the fix need candidate code in the
judging process), and the verifier says so in every report; the verdict then
rests on the out-of-process oracle. `error` = the probe could not get an
answer (infrastructure): nothing is recorded.
"""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from touchstone.harness import HiddenSuite
from touchstone.harness.isolation.runner import judge_code_digest
from touchstone.tasks.environment import task_environment

RECORD_FILE = "isolation.json"


# The probe's rules, beside the harness's code (`judge`): a verdict decided under other rules is probed again.
PROBE_RULES = "split-1"


class IsolationVerdict(BaseModel):
    status: Literal["isolated", "split", "not_isolated", "error"]
    detail: str
    # `split`: the required tests graded in process (they fail isolated on the reference; never a fail-to-pass test)
    in_process: list[str] = []
    task_hash: str
    backend: str
    probed_at: str = ""
    # data files of the pristine workspace, outside the test folders, that the tests read when run
    # on the reference (golden files): protected from the candidate, served read-only to the tests
    inputs: list[str] = []
    # the isolation harness's code and the probe's rules it was decided under (`probe_identity`): a fix to
    # the harness (a src layout found, a builtin that crosses) can turn a task isolated, so older verdicts
    # are probed again
    judge: str = ""

    @property
    def ok(self) -> bool:
        """The task's isolation is decided (either way): it is usable. The
        validation hook's contract (`touchstone.taskmaking.validate`)."""
        return self.status != "error"


def probe_isolation(task, backend: str = "auto", record: bool = True) -> IsolationVerdict:
    """Grade the task's reference isolated once (run 0 of the plan) and, when
    that decided it either way, record the verdict beside the task. Task
    validation calls this (`touchstone.taskmaking.validate`)."""
    stamp = datetime.now(UTC).isoformat(timespec="seconds")

    inputs: list[str] = []

    def verdict(status: str, detail: str, in_process: list[str] = ()) -> IsolationVerdict:
        return IsolationVerdict(status=status, detail=detail[:2000], task_hash=task.content_hash, backend=backend,
                                probed_at=stamp, inputs=inputs, judge=probe_identity(),
                                in_process=list(in_process))  # fmt: skip

    if task.reference_dir is None:
        return verdict("error", "the task has no reference to probe with")
    environment = task_environment(task)
    # which files outside the test folders the tests read, as they run on the reference (in process)
    read = HiddenSuite(task, task.required_tests, environment).grade(overlays=[task.reference_dir],
                                                                    backend=backend, record_reads=True)  # fmt: skip
    inputs = [r for r in read.reads if (task.workspace_dir / r).is_file()]
    suite = HiddenSuite(task, task.required_tests, environment, inputs=inputs)  # what the verifier grades with
    with tempfile.TemporaryDirectory(prefix="touchstone-isolation-probe-") as tmp:
        result = suite.run_isolated(
            suite.compose_isolated(Path(tmp), overlays=[task.reference_dir]), 0, backend=backend
        )
    if result.status == "error":
        return verdict("error", result.evidence)
    if result.status == "pass":
        decided = verdict("isolated", f"the reference passes isolated: {result.evidence}")
    elif in_process := split_of(task, result.failed):
        decided = verdict("split", f"the reference fails isolated only tests that pass before the fix: "
                                   f"{result.evidence}", in_process)  # fmt: skip
    else:
        decided = verdict("not_isolated", f"the reference fails isolated: {result.evidence}")
    if record:
        record_isolation(task, decided)
    return decided


def split_of(task, failed_isolated: dict[str, str]) -> list[str]:
    """The tests a split grading runs in process, or [] when the task cannot
    split: it names its required tests exactly, every fail-to-pass test passed
    isolated, and some required test did too (else nothing would be isolated)."""
    required, fixing = task.required_tests, set(task.fail_to_pass or ())
    if not required or not fixing or not failed_isolated or len(failed_isolated) >= len(required):
        return []
    if fixing & set(failed_isolated) or not set(failed_isolated) <= set(required):
        return []
    return sorted(failed_isolated)


def probe_identity() -> str:
    """What a verdict is decided under: the isolation harness's code and the probe's rules."""
    return f"{judge_code_digest()}+{PROBE_RULES}"


def record_isolation(task, verdict: IsolationVerdict) -> Path:
    """Write TASK_DIR/isolation.json (not part of the task's content hash)."""
    if verdict.status == "error":
        raise ValueError(f"nothing to record for task {task.id}: the probe failed ({verdict.detail})")
    path = Path(task.dir) / RECORD_FILE
    path.write_text(verdict.model_dump_json(indent=2) + "\n")
    return path


def recorded_isolation(task) -> IsolationVerdict | None:
    """The task's recorded verdict, if it was probed on this very content by this isolation harness."""
    path = Path(task.dir) / RECORD_FILE
    if not path.is_file():
        return None
    try:
        verdict = IsolationVerdict.model_validate(json.loads(path.read_text()))
    except ValueError as exc:
        raise ValueError(f"{path}: not an isolation record: {exc}") from exc
    return verdict if verdict.task_hash == task.content_hash and verdict.judge == probe_identity() else None
