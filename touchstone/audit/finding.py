"""What an audit rule that fires records: the finding, and how severe it is.
The verifier's report carries the findings (touchstone/verify/report.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

Severity = Literal["reject", "flag"]


class AuditFinding(BaseModel):
    """One audit rule that fired. `step` is the tool-call index (action audit)
    or None for findings about the final diff (static audit)."""

    rule: str
    severity: Severity
    step: int | None = None
    path: str | None = None
    line: int | None = None
    evidence: str = ""
