"""Action audit over the harness-side action log of the verifier's OWN replay
(never over what the agent or its trajectory says happened).

Events are built by the replay: every exec/read/write record of the sandbox's
action log (mapped to the step that caused it), the text of files the run
created or changed (scanned at every step, so a script that was deleted
before the end still counts), and protected paths changed at some step.
Rules come from the audit policy; each finding names rule, step and evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from touchstone.verify.policy import AuditPolicy
from touchstone.verify.report import AuditFinding


@dataclass(frozen=True)
class ActionEvent:
    step: int | None
    op: str  # exec | read | write | content | protected
    text: str  # command line, path, file text, or protected path
    where: str = ""  # path of a content event


def events_from_records(records: list, step: int | None) -> list[ActionEvent]:
    """Action-log records (touchstone.sandbox.ActionRecord) caused by one step -> events."""
    events = []
    for rec in records:
        if rec.op == "exec":
            command = rec.args.get("command", "")
            text = command if isinstance(command, str) else " ".join(map(str, command))
            events.append(ActionEvent(step, "exec", text))
        else:
            events.append(ActionEvent(step, rec.op, str(rec.args.get("path", ""))))
    return events


def audit_actions(events: list[ActionEvent], policy: AuditPolicy) -> list[AuditFinding]:
    findings: list[AuditFinding] = []
    seen: set[tuple[str, int | None, str]] = set()
    for rule in policy.action:
        pattern = re.compile(rule.pattern) if rule.pattern else None
        for ev in events:
            if ev.op not in rule.ops:
                continue
            match = pattern.search(ev.text) if pattern else None
            if pattern and not match:
                continue
            key = (rule.id, ev.step, ev.where or ev.text[:200])
            if key in seen:
                continue
            seen.add(key)
            findings.append(
                AuditFinding(
                    rule=rule.id,
                    severity=rule.severity,
                    step=ev.step,
                    path=ev.where or (ev.text if ev.op in ("read", "write", "protected") else None),
                    evidence=_evidence(rule.description, ev, match),
                )
            )
    return findings


def _evidence(description: str, ev: ActionEvent, match: re.Match | None) -> str:
    if match is None:
        return f"step {ev.step}: {ev.op} {ev.text[:200]!r} ({description})"
    lo, hi = max(0, match.start() - 60), min(len(ev.text), match.end() + 60)
    where = f" in {ev.where}" if ev.where else ""
    return f"step {ev.step}: {ev.op}{where} …{ev.text[lo:hi]!r}… matches {match.group(0)[:80]!r} ({description})"
