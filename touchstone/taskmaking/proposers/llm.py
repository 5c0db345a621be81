"""LLM self-proposal (Absolute-Zero style): the current policy proposes a task as
structured output (statement, starting stub, reference solution, pytest tests).
A proposal goes through parsing, dedup against existing tasks (normalized-AST
hash of the reference, near-duplicate statement text) and the same validation
as every task. The proposer's learnability reward is 1 - solve rate when the
current policy's solve rate over k attempts is strictly between 0 and 1, else 0
(invalid proposals get 0); rewards are recorded for training the proposer.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from pydantic import BaseModel, ConfigDict, ValidationError

from touchstone.agent.loop import run_episode
from touchstone.agent.policies import PolicyError, PolicyTurn, make_policy
from touchstone.agent.policies.spec import PolicySpec
from touchstone.taskmaking.proposers.common import Candidate, finalize, reject, run_candidates, write_solution_task
from touchstone.tasks.environment import task_environment
from touchstone.harness import TestRunResult, run_hidden_tests
from touchstone.tasks.schema import INDEX_FILE, EntryPoint, Task, TaskSource, load_task_set
from touchstone.taskmaking.similarity import normalized_ast_hash, text_similarity
from touchstone.taskmaking.index import REWARDS_FILE
from touchstone.taskmaking.validate import ValidationConfig
from touchstone import pyast

SIMILARITY = 0.9  # statements at least this similar are near-duplicates

SYSTEM_PROMPT = """You design small, self-contained Python coding tasks for training a coding agent.
Reply with ONE JSON object and nothing else, with these string fields:
  "statement":   what the solver is told (never the solution),
  "entry_point": the name of the function to implement,
  "stub":        the contents of solution.py the solver starts from (signature + docstring, body raising NotImplementedError),
  "reference":   a complete, correct solution.py,
  "tests":       a pytest file that imports from solution (`from solution import ...`) and checks exact values.
Make the task neither trivial nor impossible: tests must pin down the behaviour, including edge cases."""
USER_PROMPT = "Propose a new task. Use the standard library only."


class ProposalError(ValueError):
    """A model output that is not a usable proposal; the message says why."""


class Proposal(BaseModel):
    model_config = ConfigDict(extra="forbid")

    statement: str
    entry_point: str
    stub: str
    reference: str
    tests: str


def json_object(text: str) -> dict:
    """The JSON object in a model output: the whole text, a ```json fence, or the
    outermost {...} span."""
    fence = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.S)
    spans = [text.strip()] + ([fence.group(1)] if fence else [])
    if "{" in text and "}" in text:
        spans.append(text[text.index("{") : text.rindex("}") + 1])
    for span in spans:
        try:
            value = json.loads(span)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    raise ProposalError("no JSON object found in the output")


def _top_level_functions(code: str) -> set[str]:
    return {n.name for n in pyast.parse(code).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def parse_proposal(text: str) -> Proposal:
    """Parse and sanity-check one model output. Raises ProposalError naming the problem."""
    raw = json_object(text)
    try:
        p = Proposal.model_validate(raw)
    except ValidationError as exc:
        raise ProposalError(
            "; ".join(f"{'.'.join(map(str, e['loc'])) or 'proposal'}: {e['msg']}" for e in exc.errors())
        ) from None
    if not p.entry_point.isidentifier():
        raise ProposalError(f"entry_point {p.entry_point!r} is not a Python name")
    if len(p.statement.strip()) < 20:
        raise ProposalError("statement is too short to describe a task")
    for name in ("stub", "reference", "tests"):
        try:
            pyast.parse(getattr(p, name))
        except SyntaxError as exc:
            raise ProposalError(f"{name} does not parse: line {exc.lineno}: {exc.msg}") from None
    for name in ("stub", "reference"):
        if p.entry_point not in _top_level_functions(getattr(p, name)):
            raise ProposalError(f"{name} does not define function {p.entry_point!r}")
    if not any(f.startswith("test") for f in _top_level_functions(p.tests)):
        raise ProposalError("tests define no test function")
    if p.entry_point not in p.tests:
        raise ProposalError(f"tests never mention {p.entry_point!r}")
    return p


# -- dedup ------------------------------------------------------------------------------


class DedupIndex:
    """Known tasks (existing sets plus proposals seen so far). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hashes: dict[str, str] = {}  # normalized AST hash -> task id
        self._statements: list[tuple[str, str]] = []  # (task id, statement)

    def add_task_set(self, root: Path) -> None:
        for t in load_task_set(root):
            ref = t.reference_dir
            code = "\n".join(p.read_text() for p in sorted(ref.rglob("*.py"))) if ref else ""
            self._add(t.id, code, t.statement)

    def _add(self, task_id: str, code: str, statement: str) -> None:
        try:
            self._hashes.setdefault(normalized_ast_hash(code), task_id)
        except SyntaxError:
            pass
        self._statements.append((task_id, statement))

    def check_and_add(self, task_id: str, p: Proposal) -> str | None:
        """Why `p` duplicates a known task (None when it is new); new ones are added."""
        with self._lock:
            h = normalized_ast_hash(p.reference)
            if h in self._hashes:
                return f"reference is the same program (normalized AST) as task {self._hashes[h]}"
            for other, statement in self._statements:
                score = text_similarity(p.statement, statement)
                if score >= SIMILARITY:
                    return f"statement is {score:.0%} similar to task {other}"
            self._add(task_id, p.reference, p.statement)
            return None


# -- building and scoring -----------------------------------------------------------------


def write_proposal_task(task_dir: Path, p: Proposal, source: TaskSource) -> tuple[Task, TestRunResult | None]:
    task = Task(
        id=source.unit,
        statement=p.statement,
        timeout_s=30,
        entry_points=[EntryPoint(module="solution", function=p.entry_point)],
        source=source,
    )
    return write_solution_task(task_dir, task, stub=p.stub, reference=p.reference, tests=p.tests), None


def proposal_candidate(task_id: str, text: str, origin: str, dedup: DedupIndex) -> Candidate:
    """Parse and dedup now, in output order (so which of two duplicates survives is
    deterministic); the task is written and validated later, in parallel."""
    source = TaskSource(proposer="llm", origin=origin, unit=task_id)
    try:
        p = parse_proposal(text)
    except ProposalError as exc:
        verdict = reject(task_id, "malformed", str(exc))
        return Candidate(task_id, source, lambda _d: verdict)
    duplicate = dedup.check_and_add(task_id, p)
    if duplicate:
        verdict = reject(task_id, "duplicate", duplicate)
        return Candidate(task_id, source, lambda _d: verdict)
    return Candidate(task_id, source, lambda d: write_proposal_task(d, p, source))


def learnability_reward(solve_rate: float | None) -> float:
    """1 - solve rate when 0 < rate < 1, else 0 (always or never solved teaches nothing)."""
    if solve_rate is None or not 0.0 < solve_rate < 1.0:
        return 0.0
    return 1.0 - solve_rate


def solved(task: Task, patch: str, backend: str) -> bool:
    """Does the agent's final patch pass the task's required hidden tests?"""
    run = run_hidden_tests(
        task, required=task.required_tests, environment=task_environment(task), patch=patch, backend=backend
    )
    return run.ok


def solve_rate(task: Task, policy, attempts: int, backend: str) -> float:
    """Share of `attempts` episodes of `policy` whose patch passes the hidden tests."""
    wins = sum(
        solved(task, run_episode(task, policy, attempt=a, backend=backend).diff.patch, backend) for a in range(attempts)
    )
    return wins / attempts


def ask(policy, messages: list[dict], seed: int):
    """One completion of `policy` (a `PolicyTurn`); a policy that fails answers
    with a turn naming its error, which no parser accepts."""
    try:
        return policy.episode(seed, max_turns=1).act(messages, [])
    except PolicyError as exc:
        return PolicyTurn(message={"role": "assistant", "content": f"<policy error: {exc}>"})


def generate(policy, seed: int) -> str:
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": USER_PROMPT}]
    return str(ask(policy, messages, seed).message.get("content") or "")


@dataclass
class LLMResult:
    out: Path
    index: Path
    rewards_path: Path
    kept: int
    rejected: int


def propose_from_outputs(
    outputs: list[str],
    out: Path,
    *,
    origin: str,
    existing: list[Path] | None = None,
    workers: int = 2,
    cfg: ValidationConfig | None = None,
) -> tuple[list, list[Task]]:
    """Parse, dedup and validate model outputs (one task candidate each); write the index."""
    dedup = DedupIndex()
    for root in existing or []:
        dedup.add_task_set(root)
    cands = [
        proposal_candidate(f"llm-{i:04d}-{hashlib.sha256(t.encode()).hexdigest()[:8]}", t, origin, dedup)
        for i, t in enumerate(outputs)
    ]
    rows, kept = run_candidates(
        cands, out, n=None, workers=workers, cfg=cfg or ValidationConfig(), desc="llm proposals"
    )
    finalize(out, rows)
    return rows, kept


def propose_llm(
    policy_spec: PolicySpec,
    out: Path,
    *,
    n: int = 8,
    attempts: int = 4,
    existing: list[Path] | None = None,
    workers: int = 2,
    cfg: ValidationConfig | None = None,
    sampling=None,
) -> LLMResult:
    cfg = cfg or ValidationConfig()
    policy = make_policy(policy_spec, sampling)
    try:
        outputs = [generate(policy, seed) for seed in range(n)]
        rows, kept = propose_from_outputs(
            outputs, out, origin=str(policy_spec), existing=existing, workers=workers, cfg=cfg
        )
        rates = {t.id: solve_rate(t, policy, attempts, cfg.backend) for t in kept}
    finally:
        policy.close()
    index = out / INDEX_FILE
    by_id = {r.id: r for r in rows}
    ids = sorted(by_id)
    rewards = pl.DataFrame(
        {
            "task_id": ids,
            "output": [outputs[int(i.split("-")[1])] for i in ids],
            "status": [by_id[i].status for i in ids],
            "reason": [by_id[i].reason for i in ids],
            "solve_rate": [rates.get(i) for i in ids],
            "reward": [learnability_reward(rates.get(i)) for i in ids],
            "policy": [str(policy_spec)] * len(ids),
            "checkpoint_hash": [policy.checkpoint_hash] * len(ids),
        },
        schema_overrides={"solve_rate": pl.Float64, "reason": pl.Utf8, "checkpoint_hash": pl.Utf8},
    )
    rewards_path = out / REWARDS_FILE
    rewards.write_parquet(rewards_path)
    return LLMResult(out, index, rewards_path, len(kept), len(rows) - len(kept))
