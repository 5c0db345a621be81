"""The verification report: the one record the verifier hands to later stages.

One `VerificationReport` per trajectory. Every check yields a `CheckResult`
(pass / fail / error / skipped, with evidence); every audit rule that fires
yields an `AuditFinding`. The verdict is derived from those, never set by hand,
so a report cannot claim `accept` while carrying a failed check.
Format: docs/formats/report.md.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator

from touchstone.audit.finding import AuditFinding
from touchstone.tables import Apart, Derived, Json, count

VERIFIER_VERSION = "touchstone-verify/1"
# grading runs per trajectory, each in a fresh sandbox with its own hash seed and
# test order: a test that passes on some and fails on others is flaky, not a pass
DEFAULT_REPLAYS = 3

CheckStatus = Literal["pass", "fail", "error", "skipped"]
Verdict = Literal["accept", "reject", "inconclusive"]
# How the `tests` check ran: "isolated" = no candidate code in the process that
# judged (docs/VERIFIER.md, "Isolation"); "not_isolated" = the candidate's code
# was importable in the pytest process (the task's tests do not run isolated).
# "split" = the tests that show the fix ran isolated; a few that already passed before it and
# cannot run isolated even on the reference (touchstone.tasks.isolation) ran in process.
Isolation = Literal["isolated", "split", "not_isolated"]
# What was verified behind a test verdict, strongest first (docs/VERIFIER.md, "Guards"):
# "isolation+oracle": the tests ran with no candidate code in the judging process AND an
#   out-of-process comparison with the reference agreed (the recorded-call oracle replayed
#   calls, or the lockstep check compared what the tests observed);
# "isolation": the tests ran isolated; no oracle compared anything (no reference);
# "split_isolation": the tests that show the fix (every fail-to-pass test, most others) ran
#   isolated; the task's few tests that cannot run isolated even on the reference ran in process,
#   so a forged result could hide a regression there only (the static audit runs unrelaxed);
# "oracle": candidate code was in the judging process (the task's tests cannot run isolated),
#   but the oracle compared calls of EVERY required test and none was unreplayable;
# "in_process": candidate code was in the judging process and the oracle covered less: the
#   weakest (a run without any oracle comparison is inconclusive, never a pass).
# "none" is the name earlier reports gave "in_process" (read, never derived).
Guard = Literal["isolation+oracle", "isolation", "split_isolation", "oracle", "in_process", "none"]
# The guards a sceptical reviewer keeps for training by default (DataConfig.include_unguarded
# keeps the others too): the verdict that the fix works came from a process the candidate could not reach.
TRAINING_GUARDS = frozenset({"isolation+oracle", "isolation", "split_isolation"})

# The checks a full verification runs, in the order it runs them.
CHECK_NAMES = (
    "replay",
    "diff_match",
    "protected_paths",
    "compile",
    "static_audit",
    "action_audit",
    "tests",
    "determinism",
    "oracle",
    "lockstep",
)


class CheckResult(BaseModel):
    name: str
    status: CheckStatus
    evidence: str = ""
    # the numbers behind the evidence (the oracle's coverage)
    counts: Annotated[dict[str, int], Json()] = Field(default_factory=dict)


def failed_names(checks: list[CheckResult]) -> list[str]:
    """The names of the failed checks, in run order."""
    return [c.name for c in checks if c.status == "fail"]


START_TOOL = "start"  # the tool of the start point: the task as given, before any turn


class ProgressPoint(BaseModel):
    """Share of required hidden tests passing after a state-changing step, or, for
    the start point (turn and step -1, tool `start`), on the task as given."""

    turn: int = Field(ge=-1)
    step: int = Field(ge=-1)
    tool: str
    passed: int
    total: int
    fraction: float = Field(ge=0.0, le=1.0)

    @property
    def is_start(self) -> bool:
        return self.turn == -1


class VerificationReport(BaseModel):
    """Its table form (`reports.parquet`, docs/formats/report.md) is derived from
    these fields (`touchstone.tables`): checks and findings have tables of their
    own, the progress is JSON text, and the whole report rides along as JSON."""

    report_id: str = ""
    trajectory_id: str
    task_id: str
    task_hash: str
    environment_digest: str | None = None  # the task environment every run used (None: base)
    verdict: Verdict = "inconclusive"
    reasons: list[str] = Field(default_factory=list)
    checks: Annotated[list[CheckResult], Apart(), Derived("failed_checks", list[str], failed_names)] = Field(
        default_factory=list
    )
    findings: Annotated[list[AuditFinding], Apart(), count("n_findings")] = Field(default_factory=list)
    progress: Annotated[list[ProgressPoint] | None, Json()] = None
    isolation: Isolation | None = None  # how `tests` ran (None: it did not run)
    guard: Guard | None = None  # derived from isolation and the oracle check, never set by hand
    verifier_version: str = VERIFIER_VERSION
    duration_s: float = 0.0

    @model_validator(mode="after")
    def _derive(self) -> "VerificationReport":
        self.verdict, self.reasons = derive_verdict(self.checks)
        self.guard = derive_guard(self.isolation, self.check("oracle"), self.check("lockstep"))
        if not self.report_id:
            self.report_id = self.content_id()
        return self

    def content_id(self) -> str:
        """Stable id: same trajectory, task, checks and verifier → same id."""
        payload = json.dumps(
            {
                "trajectory_id": self.trajectory_id,
                "task_hash": self.task_hash,
                "checks": [c.model_dump() for c in self.checks],
                "verifier_version": self.verifier_version,
                **({"isolation": self.isolation} if self.isolation else {}),
            },
            sort_keys=True,
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def check(self, name: str) -> CheckResult | None:
        return next((c for c in self.checks if c.name == name), None)

    def failed_checks(self) -> list[str]:
        return failed_names(self.checks)


def derive_guard(
    isolation: Isolation | None, oracle: CheckResult | None, lockstep: CheckResult | None = None
) -> Guard | None:
    """What a run's verdict rests on. A comparison with the reference earns
    the oracle's name only when it covered what the tests assert on: every
    required test had something compared, and nothing a test read (captured
    output, files, values) escaped observation. One replayed call is not enough."""
    if isolation is None:
        return None
    oracle_covered = _covered(oracle) and oracle.counts.get("replayed", 0) > 0 and \
        oracle.counts.get("unreplayable", 1) == 0  # fmt: skip
    if isolation == "split":
        return "split_isolation"
    if isolation == "isolated":
        lockstep_covered = _covered(lockstep) and lockstep.counts.get("compared", 0) > 0
        # the recorded-call oracle does not see output or files: where lockstep saw a test read some, it decides
        unseen = lockstep is not None and lockstep.counts.get("unobserved", 0) > 0
        return "isolation+oracle" if lockstep_covered or (oracle_covered and not unseen) else "isolation"
    return "oracle" if oracle_covered else "in_process"


def _covered(check: CheckResult | None) -> bool:
    return (
        check is not None
        and check.status == "pass"
        and check.counts.get("tests_uncovered", 1) == 0
        and check.counts.get("unobserved", 1) == 0
    )


def derive_verdict(checks: list[CheckResult]) -> tuple[Verdict, list[str]]:
    """Any failed check rejects. Otherwise an errored check (infrastructure,
    harness timeout) makes the report inconclusive. No checks at all is
    inconclusive too: absence of evidence is not acceptance."""
    failed = [c for c in checks if c.status == "fail"]
    if failed:
        return "reject", [f"{c.name}: {c.evidence}".strip() for c in failed]
    errored = [c for c in checks if c.status == "error"]
    if errored or not checks:
        reasons = [f"{c.name}: {c.evidence}".strip() for c in errored] or ["no checks ran"]
        return "inconclusive", reasons
    return "accept", []
