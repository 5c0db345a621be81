"""Action audit over the harness-side action log of the verifier's OWN replay
(never over what the agent or its trajectory says happened).

Events are built by the replay: every exec/read/write record of the sandbox's
action log (mapped to the step that caused it), an exec split into the simple
commands it ran (`touchstone.audit.shell`: rules match programs and their
real arguments, not substrings of the line), the text of files the run
created or changed (scanned at every step, so a script that was deleted
before the end still counts), and protected paths changed at some step.
Rules come from the audit policy; each finding names rule, step and evidence.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from touchstone.audit.policy import AuditPolicy
from touchstone.audit.finding import AuditFinding
from touchstone.audit.shell import parse_command, resolve

_ENV_SETTERS = {"export", "env", "declare", "typeset", "local", "readonly"}


@dataclass(frozen=True)
class ActionEvent:
    step: int | None
    op: str  # see ActionOp in policy.py
    text: str  # command line, simple command, argument/path, assignment, code, file text, or protected path
    where: str = ""  # path of a content event; "unparsed" for commands bashlex could not parse


def events_from_records(records: list, step: int | None) -> list[ActionEvent]:
    """Action-log records (touchstone.sandbox.ActionRecord) caused by one step -> events.
    An exec record yields the raw line (`exec`) and, per simple command that
    ran, the program and its arguments (`command`), each argument with paths
    made absolute (`arg`), variable assignments (`env`), redirection targets
    (`read`/`write`) and Python code handed to an interpreter (`code`)."""
    events = []
    for rec in records:
        if rec.op == "exec":
            command = rec.args.get("command", "")
            events += command_events(command if isinstance(command, str) else shlex.join(map(str, command)), step)
        else:
            events.append(ActionEvent(step, rec.op, resolve(str(rec.args.get("path", "")))))
    return events


def command_events(line: str, step: int | None) -> list[ActionEvent]:
    parsed = parse_command(line)
    where = "" if parsed.parsed else "unparsed"
    events = [ActionEvent(step, "exec", line, where)]
    for cmd in parsed.commands:
        events.append(ActionEvent(step, "command", cmd.text, where))
        events += [ActionEvent(step, "arg", path, where) for path in cmd.paths()]
        env = cmd.assigns + ([a for a in cmd.argv[1:] if "=" in a] if cmd.program in _ENV_SETTERS else [])
        events += [ActionEvent(step, "env", a, where) for a in env]
        for op, target in cmd.redirects:
            kind = "read" if op.startswith("<") else "write"
            events.append(ActionEvent(step, kind, resolve(target, cmd.cwd), where))
    events += [ActionEvent(step, "code", code, where or "python -c") for code in parsed.code]
    return events


def audit_actions(events: list[ActionEvent], policy: AuditPolicy) -> list[AuditFinding]:
    findings: list[AuditFinding] = []
    seen: set[tuple[str, int | None, str]] = set()
    for rule in policy.action:
        patterns = {op: re.compile(p) if p else None for op, p in rule.op_patterns().items()}
        for ev in events:
            if ev.op not in patterns:
                continue
            pattern = patterns[ev.op]
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
    where = f" ({ev.where})" if ev.where == "unparsed" else f" in {ev.where}" if ev.where else ""
    return f"step {ev.step}: {ev.op}{where} …{ev.text[lo:hi]!r}… matches {match.group(0)[:80]!r} ({description})"
