"""Hand-built verification reports in the verifier's own record type."""

from __future__ import annotations

from touchstone.audit.finding import AuditFinding
from touchstone.verify.report import CheckResult, ProgressPoint, VerificationReport


def report(
    tid: str,
    verdict: str,
    progress: dict[int, float] | None = None,
    hack: bool = False,
    task_id: str = "task-a",
    task_hash: str = "h-a",
    isolation: str | None = None,
) -> VerificationReport:
    """`progress` maps turn -> pass fraction after that (state-changing) turn."""
    status = {"accept": "pass", "reject": "fail", "inconclusive": "error"}[verdict]
    checks = [CheckResult(name="tests", status=status, evidence="" if status == "pass" else f"tests {status}")]
    findings = (
        [AuditFinding(rule="edited_protected_test", severity="reject", step=0, evidence="tests/x.py")] if hack else []
    )
    points = (
        None
        if progress is None
        else [
            ProgressPoint(turn=t, step=i, tool="str_replace", passed=round(f * 4), total=4, fraction=f)
            for i, (t, f) in enumerate(sorted(progress.items()))
        ]
    )
    rep = VerificationReport(
        trajectory_id=tid,
        task_id=task_id,
        task_hash=task_hash,
        checks=checks,
        findings=findings,
        progress=points,
        isolation=isolation,
    )
    assert rep.verdict == verdict
    return rep
