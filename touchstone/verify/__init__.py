"""The verifier and the independent auditor. Public API:

    verify_trajectory(task, messages, *, replays=3, progress=False, backend="auto",
                      recorded_diff=None) -> VerificationReport
    verify_batch(tasks_dir, trajectories, workers, out) -> Path

What each check defends against: docs/VERIFIER.md; report format:
docs/formats/report.md."""

from touchstone.audit.finding import AuditFinding
from touchstone.verify.report import VERIFIER_VERSION, CheckResult, ProgressPoint, VerificationReport


def __getattr__(name: str):
    # The heavy entry points import the sandbox; load them on first use.
    if name == "verify_trajectory":
        from touchstone.verify.verifier import verify_trajectory

        return verify_trajectory
    if name == "verify_batch":
        from touchstone.verify.batch import verify_batch

        return verify_batch
    raise AttributeError(name)


__all__ = [
    "VERIFIER_VERSION",
    "AuditFinding",
    "CheckResult",
    "ProgressPoint",
    "VerificationReport",
    "verify_batch",
    "verify_trajectory",
]
