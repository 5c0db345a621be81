"""The audit policy: rule ids, severities and allowed contexts, loaded from
YAML so users can extend it without touching code (audit_policy.yaml is the
default; a user file adds rules or replaces rules with the same id)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from touchstone.audit.finding import Severity

DEFAULT_POLICY = Path(__file__).with_name("audit_policy.yaml")

StaticKind = Literal[
    "reference",
    "import",
    "attribute",
    "module_attr_write",
    "dynamic_module_attr",
    "eq_constant",
    "string",
    "literal_table",
    "namespace_write",
    "exec_file",
    "encoding",
    "archive",
]
Context = Literal["module", "function", "main_guard", "test_file"]


class StaticRule(BaseModel):
    id: str
    description: str = ""
    kind: StaticKind
    names: list[str] = Field(default_factory=list)
    patterns: list[str] = Field(default_factory=list)
    severity: Severity
    severity_in_function: Severity | None = None
    # Rules whose only purpose is to protect a judge that runs in the
    # candidate's process relax to this once the test run is isolated
    # (candidate code out of the judging process); None = same severity.
    severity_when_isolated: Severity | None = None
    allow_in: list[Context] = Field(default_factory=list)
    min_entries: int = 8
    # False: a proposer never allows this rule for a task even when the
    # reference trips it (rules about the judge's own integrity)
    auto_allow: bool = True

    def severity_for(self, *, in_function: bool = False, isolated: bool = False) -> Severity:
        if isolated and self.severity_when_isolated:
            return self.severity_when_isolated
        if in_function and self.severity_in_function:
            return self.severity_in_function
        return self.severity


# exec: the raw command line; command: one simple command that ran (program
# basename and arguments, one space apart); arg: each argument of a simple
# command, paths made absolute; env: a variable assignment (NAME=value);
# read/write: a path read or written (file tools and redirections); code:
# Python code handed to an interpreter (`python -c`, heredoc); content: text
# of files written during the run; protected: protected paths changed at some step.
ActionOp = Literal["exec", "command", "arg", "env", "read", "write", "code", "content", "protected"]


class ActionRule(BaseModel):
    id: str
    description: str = ""
    ops: list[ActionOp] = Field(default_factory=list)
    pattern: str = ""  # for every op in `ops`
    patterns: dict[ActionOp, str] = Field(default_factory=dict)  # per-op patterns (in addition)
    severity: Severity

    @model_validator(mode="after")
    def _some_op(self) -> "ActionRule":
        if not self.ops and not self.patterns:
            raise ValueError(f"action rule {self.id}: give `ops` (with `pattern`) or `patterns`")
        return self

    def op_patterns(self) -> dict[str, str]:
        return {**{op: self.pattern for op in self.ops}, **self.patterns}


class AuditPolicy(BaseModel):
    static: list[StaticRule] = Field(default_factory=list)
    action: list[ActionRule] = Field(default_factory=list)

    def merged(self, other: "AuditPolicy") -> "AuditPolicy":
        """Rules of `other` replace same-id rules here and add the rest."""
        return AuditPolicy(static=_merge(self.static, other.static), action=_merge(self.action, other.action))

    def without(self, rule_ids: set[str]) -> "AuditPolicy":
        """The policy minus rules a task explicitly allows (e.g. a task that
        asks for an `__eq__` that is constant, or an exit code)."""
        return AuditPolicy(
            static=[r for r in self.static if r.id not in rule_ids],
            action=[r for r in self.action if r.id not in rule_ids],
        )


def _merge(base: list, extra: list) -> list:
    ids = {r.id for r in extra}
    return [r for r in base if r.id not in ids] + list(extra)


class AuditRulesError(ValueError):
    pass


def _read(path: Path) -> AuditPolicy:
    try:
        data = yaml.safe_load(path.read_text()) or {}
        return AuditPolicy.model_validate(data)
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise AuditRulesError(f"audit policy {path}: {exc}") from exc


@lru_cache(maxsize=16)
def load_policy(extra: Path | None = None) -> AuditPolicy:
    """The default policy, extended by `extra` when given."""
    policy = _read(DEFAULT_POLICY)
    return policy.merged(_read(Path(extra))) if extra else policy
