"""Self-play proposals: the round's own policy proposes tasks (Absolute Zero's
proposer role), in two kinds: a `standalone` task (statement, stub, reference,
tests), conditioned on a few reference tasks sampled from the round's pool so
proposals stay on distribution, and a `bug` in real code (SWE-smith's
model-written bugs: a seed function rewritten, judged by the seed's own tests;
touchstone.taskmaking.proposers.selfbug).

Proposals are sampled in groups: the `group_size` proposals of a group share
one prompt (the same references, different sampling seeds), so a learnable
proposal and an invalid one of the same group form a preference pair
(touchstone.data.proposer). Each proposal is parsed, then screened before any
sandbox run: a proposal matching a held-out task or a configured benchmark
problem (normalized AST, code 5-grams, statement similarity:
`touchstone.taskmaking.contamination.compare`) is rejected `contaminated`; one
matching a task of the pool or an earlier proposal is rejected `duplicate`. Survivors go through the same validation as every task
(its static leak check covers the statement). Every proposal, kept or not, is
recorded in `DIR/proposals.parquet` (`ProposalRecord`) with its prompt, output,
the proposing policy and its checkpoint hash; kept tasks carry the same in
`source.meta.proposal` and in the index columns `policy`, `policy_checkpoint`.
Zero valid proposals is a result: the round goes on with its other sources.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import polars as pl
from pydantic import BaseModel, Field

from touchstone import atomic
from touchstone.taskmaking.contamination import KnownProblem, compare, configured_sets, known_problems, solution_code
from touchstone.taskmaking.proposers.common import Candidate, finalize, reject, run_candidates
from touchstone.taskmaking.index import read_index
from touchstone.taskmaking.proposers.llm import SYSTEM_PROMPT, ProposalError, ask, parse_proposal, write_proposal_task
from touchstone.taskmaking.proposers.mutation import usable_seeds
from touchstone.taskmaking.proposers.selfbug import (
    Site,
    answer_digest,
    bug_candidate,
    bug_messages,
    pool_digests,
    sites,
)
from touchstone.tasks.schema import TaskSource, load_task_set
from touchstone.taskmaking.validate import ValidationConfig

PROPOSALS_FILE = "proposals.parquet"
PROPOSAL_MAX_TOKENS = 768  # completion tokens per proposal: statement, stub, reference and tests
Kind = Literal["standalone", "bug"]


class SelfPlayConfig(BaseModel):
    n: int = Field(default=0, ge=0, description="Proposals the policy makes per round (0: self-proposal off).")
    group_size: int = Field(default=2, ge=1, description="Proposals sampled per prompt (same references).")
    references: int = Field(default=3, ge=0, description="Reference tasks from the pool shown in each prompt.")
    snippet_chars: int = Field(default=1200, ge=100, description="Characters of each reference's code shown.")
    kinds: list[Kind] = Field(
        default=["standalone"], min_length=1, description="Proposal kinds (standalone, bug), one per group in turn."
    )


class Reference(BaseModel):
    task_id: str
    statement: str
    code: str


class ProposalRecord(BaseModel):
    """One proposer episode: what the policy was asked, what it answered, and
    what became of it (format: docs/formats/task.md, "Self-play proposals")."""

    proposal_id: str  # also the task id of the candidate
    round: str | None
    kind: str
    group: int  # proposals of one group share `prompt`
    policy: str
    checkpoint_hash: str | None
    prompt: str  # JSON list of chat messages
    output: str  # the assistant's text
    turn: str  # JSON of the recorded token ids / logprobs ({} when the policy records none)
    references: list[str]  # task ids shown in the prompt (standalone)
    target: str | None = None  # bug: the seed function (unit) the policy rewrote
    status: str  # kept | rejected (at proposal time; later stages may revoke or exclude)
    reason: str | None
    detail: str


@dataclass
class SelfResult:
    records: list[ProposalRecord]
    kept: int

    @property
    def rejected(self) -> int:
        return len(self.records) - self.kept


def reference_pool(sets: list[Path], snippet_chars: int = 1200) -> list[Reference]:
    """Kept tasks of `sets` as references (statement and solution code, cut)."""
    refs = []
    for root in sets:
        for task in load_task_set(root):
            refs.append(
                Reference(task_id=task.id, statement=task.statement[:600], code=solution_code(task)[:snippet_chars])
            )
    return refs


def standalone_messages(refs: list[Reference]) -> list[dict]:
    shown = "\n\n".join(
        f"### Reference {i} ({r.task_id})\nStatement: {r.statement}\nSolution code:\n```python\n{r.code}\n```"
        for i, r in enumerate(refs, 1)
    )
    intro = (
        "Tasks from the current pool, for reference. Do not copy them: propose a new, different task "
        "of similar or slightly greater difficulty.\n\n" + shown + "\n\n"
        if refs
        else ""
    )
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": intro + "Propose a new task. Use the standard library only."},
    ]


class Screen:
    """Held-out problems (a match: `contaminated`) and known tasks (a match:
    `duplicate`); every proposal that passes joins the known tasks."""

    def __init__(self, heldout: list[KnownProblem], known: list[KnownProblem]):
        self.heldout, self.known = heldout, list(known)

    def check(self, task_id: str, statement: str, code: str) -> tuple[str, str] | None:
        for reason, problems in (("contaminated", self.heldout), ("duplicate", self.known)):
            for problem in problems:
                m = compare(statement, code, problem)
                if m.contaminated:
                    where = "held-out task" if reason == "contaminated" else "task"
                    return reason, f"same problem as {where} {m.id} ({m.source}): {m.why}"
        self.known.append(KnownProblem("this round's proposals", task_id, statement, code))
        return None


def _turn_json(turn) -> str:
    recorded = {k: getattr(turn, k) for k in ("prompt_ids", "completion_ids", "logprobs") if getattr(turn, k)}
    return json.dumps(recorded)


def _candidate(task_id: str, text: str, source: TaskSource, screen: Screen) -> Candidate:
    """Parse and screen now, in output order (which of two duplicates survives is
    deterministic); the task is written and validated later, in parallel."""
    try:
        p = parse_proposal(text)
    except ProposalError as exc:
        verdict = reject(task_id, "malformed", str(exc))
        return Candidate(task_id, source, lambda _d: verdict)
    hit = screen.check(task_id, p.statement, p.reference)
    if hit:
        verdict = reject(task_id, *hit)
        return Candidate(task_id, source, lambda _d: verdict)
    return Candidate(task_id, source, lambda d: write_proposal_task(d, p, source))


@dataclass
class Prompt:
    """What one group of proposals is asked."""

    kind: str
    messages: list[dict]
    references: list[str]  # pool task ids shown (standalone)
    site: Site | None = None  # the function to rewrite (bug)


def group_prompt(
    kind: str, refs: list[Reference], sites: list[Site], cfg: SelfPlayConfig, rng: random.Random
) -> Prompt:
    """A bug prompt on a random covered seed function, or a standalone prompt
    with references drawn from the pool (also when there is no function to show)."""
    if kind == "bug" and sites:
        site = rng.choice(sites)
        return Prompt("bug", bug_messages(site), [], site)
    shown = rng.sample(refs, min(cfg.references, len(refs)))
    return Prompt("standalone", standalone_messages(shown), [r.task_id for r in shown])


def _bug_sites(stack: contextlib.ExitStack, cfg: SelfPlayConfig, seeds, heldout: Path | None, validation) -> list[Site]:
    """Covered functions of the usable seeds outside held-out units ([] when no group is a bug)."""
    if "bug" not in cfg.kinds or not cfg.n:
        return []
    usable, _ = stack.enter_context(usable_seeds(seeds, validation))
    held = {r.unit for r in read_index(heldout) if r.status == "kept"} if heldout else set()
    return sites(usable, held)


def propose_self(
    policy,
    out: Path,
    *,
    cfg: SelfPlayConfig,
    pool: list[Path],
    heldout: Path | None,
    seeds: list | None = None,
    round_key: str | None = None,
    validation: ValidationConfig | None = None,
    workers: int = 2,
    seed: int = 0,
) -> SelfResult:
    """`cfg.n` proposals of `policy` (a `touchstone.agent.policies.Policy`), screened,
    validated and written into `out` (merged into its index) with
    OUT/proposals.parquet. `pool`: task sets to draw references from and to
    deduplicate against (not the held-out set, which is never shown); `seeds`:
    the seed projects bug proposals rewrite (as `propose_mutation` takes them)."""
    rng = random.Random(seed)
    validation = validation or ValidationConfig()
    refs = reference_pool(pool, cfg.snippet_chars)
    # held-out and benchmark sets, as validation's contamination check compares them
    sets = configured_sets([*([heldout] if heldout else []), *validation.contamination_sets])
    screen = Screen(known_problems(sets), known_problems(pool))
    records, cands, bugs_seen = [], [], pool_digests(pool)
    with contextlib.ExitStack() as stack:
        bug_sites = _bug_sites(stack, cfg, seeds, heldout, validation)
        for i in range(cfg.n):
            group = i // cfg.group_size
            if i % cfg.group_size == 0:
                prompt = group_prompt(cfg.kinds[group % len(cfg.kinds)], refs, bug_sites, cfg, rng)
            turn = ask(policy, prompt.messages, seed * cfg.n + i)  # round r samples seeds r*n..r*n+n-1
            text = str(turn.message.get("content") or "")
            task_id = f"self-{round_key or 'x'}-{i:04d}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"
            lineage = {"policy": str(policy.spec), "checkpoint_hash": policy.checkpoint_hash, "kind": prompt.kind,
                       "round": round_key}  # fmt: skip
            if prompt.site is None:
                source = TaskSource(proposer="llm", origin=str(policy.spec), unit=task_id, meta={"proposal": lineage})
                cands.append(_candidate(task_id, text, source, screen))
            else:
                digest = (prompt.site.unit, answer_digest(text))
                duplicate = digest[1] is not None and digest in bugs_seen
                bugs_seen.add(digest)
                cands.append(bug_candidate(task_id, text, prompt.site, lineage, validation, duplicate))
            records.append(
                ProposalRecord(
                    proposal_id=task_id,
                    round=round_key,
                    kind=prompt.kind,
                    group=group,
                    policy=str(policy.spec),
                    checkpoint_hash=policy.checkpoint_hash,
                    prompt=json.dumps(prompt.messages),
                    output=text,
                    turn=_turn_json(turn),
                    references=prompt.references,
                    target=prompt.site.unit if prompt.site else None,
                    status="rejected",
                    reason=None,
                    detail="",
                )
            )
        rows, kept = run_candidates(cands, out, n=None, workers=workers, cfg=validation, desc="self proposals")
    finalize(out, rows)
    by_id = {r.id: r for r in rows}
    records = [
        r.model_copy(update={"status": by_id[r.proposal_id].status, "reason": by_id[r.proposal_id].reason,
                             "detail": by_id[r.proposal_id].detail})
        for r in records
    ]  # fmt: skip
    write_proposals(out, records)
    return SelfResult(records, len(kept))


def write_proposals(root: Path, records: list[ProposalRecord]) -> Path:
    schema = {
        name: (pl.List(pl.Utf8) if name == "references" else pl.Int64 if name == "group" else pl.Utf8)
        for name in ProposalRecord.model_fields
    }
    path = root / PROPOSALS_FILE
    atomic.write_parquet(pl.DataFrame([r.model_dump() for r in records], schema=schema), path)
    return path


def read_proposals(root: Path) -> list[ProposalRecord]:
    """The proposals recorded in `root` ([] when the round made none)."""
    path = root / PROPOSALS_FILE
    if not path.is_file():
        return []
    return [ProposalRecord.model_validate(r) for r in pl.read_parquet(path).to_dicts()]
