"""A round's task sources, each with its quota, into one task set:

- `procedural`: `n` validated mutation tasks from the seed projects
  (`touchstone.taskmaking.proposers.mutation`);
- `imported`: up to `n` kept tasks drawn from task sets the importers wrote
  (`touchstone propose problems`, `touchstone import swe-bench`), different ones each
  round (drawn with the round's seed), already validated when imported;
- `self`: `n` proposals of the round's own policy
  (`touchstone.taskmaking.proposers.selfplay`), conditioned on references drawn
  from the tasks the other sources just produced and those of the last few
  rounds (`history`), and deduplicated against all of them.

Held-out tasks are excluded after the first two sources (so none is ever shown
to the proposer as a reference) and again after self-proposal. The outcome per
source is written to `DIR/sources.json` (`RoundSources`).
"""

from __future__ import annotations

import random
import shutil
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, Field

from touchstone import atomic
from touchstone.taskmaking.heldout import exclude_heldout
from touchstone.taskmaking.index import IndexRow, read_index, write_index
from touchstone.taskmaking.proposers.mutation import propose_mutation
from touchstone.taskmaking.proposers.selfplay import SelfPlayConfig, propose_self
from touchstone.taskmaking.validate import ValidationConfig

SOURCES_FILE = "sources.json"
SOURCES = ("procedural", "imported", "self")


class SourceMix(BaseModel):
    procedural: int = Field(
        default=8,
        ge=0,
        description="procedural: validated mutation tasks to propose, before held-out units are excluded "
        "(cluster: 500+).",
    )
    operators: list[str] = Field(
        default_factory=list,
        description="procedural: kinds of bug to inject (touchstone.tasks.mutate.OPERATORS; empty: every operator).",
    )
    imported: list[Path] = Field(default_factory=list, description="Task sets written by the importers.")
    n_imported: int = Field(default=0, ge=0, description="imported: tasks drawn from the imported sets.")
    self_play: SelfPlayConfig = Field(default_factory=SelfPlayConfig)


class SourceOutcome(BaseModel):
    candidates: int = 0  # candidates considered (self: proposals made)
    kept: int = 0  # kept after validation and held-out exclusion
    rejected: dict[str, int] = Field(default_factory=dict)  # reason -> candidates


class RoundSources(BaseModel):
    round: str | None
    quotas: dict[str, int]
    outcomes: dict[str, SourceOutcome]
    excluded_heldout: int
    note: str  # one plain sentence on self-proposal, for the round report


def source_of(row: IndexRow) -> str:
    """Which round source an index row came from."""
    if row.policy is not None:
        return "self"
    return "procedural" if row.proposer == "mutation" else "imported"


def draw_imported(out: Path, sets: list[Path], n: int, rng: random.Random) -> int:
    """Copy `n` kept tasks (drawn with `rng`) of the imported sets into `out`,
    with their index rows; a task whose id `out` already holds is skipped.
    Returns how many were copied."""
    pool = [(root, row) for root in sets for row in read_index(root) if row.status == "kept"]
    missing = [str(root) for root in sets if not (root / "index.parquet").is_file()]
    if missing:
        raise FileNotFoundError(f"imported task set(s) without an index.parquet: {', '.join(missing)}")
    rows = {r.id: r for r in read_index(out)}
    taken = 0
    for root, row in rng.sample(pool, len(pool)):
        if taken >= n:
            break
        if row.id in rows:
            continue
        shutil.copytree(root / row.id, out / row.id)
        rows[row.id] = row
        taken += 1
    write_index(out, sorted(rows.values(), key=lambda r: r.id))
    return taken


def propose_round(
    out: Path,
    mix: SourceMix,
    *,
    seeds: list | None,
    heldout: Path | None,
    policy=None,
    history: list[Path] | None = None,
    validation: ValidationConfig | None = None,
    workers: int = 2,
    rng_seed: int = 0,
    round_key: str | None = None,
) -> RoundSources:
    """Fill `out` from every source by its quota; `policy` (a Policy) is needed
    only when `mix.self_play.n` > 0. `history`: earlier rounds' task sets, also
    references and known tasks for self-proposal (Absolute Zero's growing buffer)."""
    validation = validation or ValidationConfig()
    out.mkdir(parents=True, exist_ok=True)
    if mix.procedural:
        propose_mutation(
            out,
            seeds=seeds,
            n=mix.procedural,
            workers=workers,
            cfg=validation,
            rng_seed=rng_seed,
            operators=mix.operators,
        )
    if mix.n_imported:
        draw_imported(out, mix.imported, mix.n_imported, random.Random(rng_seed))
    excluded = exclude_heldout(out, heldout) if heldout else 0
    if mix.self_play.n:
        if policy is None:
            raise ValueError("self-proposal is on (self_play.n > 0) but no policy was given")
        propose_self(
            policy,
            out,
            cfg=mix.self_play,
            pool=[out, *(history or [])],
            heldout=heldout,
            seeds=seeds,
            round_key=round_key,
            validation=validation,
            workers=workers,
            seed=rng_seed,
        )
        excluded += exclude_heldout(out, heldout) if heldout else 0
    summary = summarize(out, mix, excluded, round_key)
    atomic.write_text(out / SOURCES_FILE, summary.model_dump_json(indent=2) + "\n")
    return summary


def propose_apart_from_heldout(
    out: Path,
    heldout_set: Path | None,
    *,
    n: int,
    rng_seed: int,
    validation,
    seeds=None,
    workers: int = 2,
    operators: list[str] | None = None,
) -> int:
    """Mutation tasks proposed and validated into `out` (touchstone.taskmaking.proposers.mutation),
    then those overlapping `heldout_set` excluded. Returns how many were excluded."""
    propose_mutation(out, seeds=seeds, n=n, workers=workers, cfg=validation, rng_seed=rng_seed, operators=operators)
    return exclude_heldout(out, heldout_set) if heldout_set is not None else 0


def summarize(out: Path, mix: SourceMix, excluded: int, round_key: str | None) -> RoundSources:
    rows = read_index(out)
    outcomes = {name: SourceOutcome() for name in SOURCES}
    for name in SOURCES:
        mine = [r for r in rows if source_of(r) == name]
        outcomes[name] = SourceOutcome(
            candidates=len(mine),
            kept=sum(r.status == "kept" for r in mine),
            rejected=dict(Counter(r.reason or "" for r in mine if r.status != "kept").most_common()),
        )
    return RoundSources(
        round=round_key,
        quotas={"procedural": mix.procedural, "imported": mix.n_imported, "self": mix.self_play.n},
        outcomes=outcomes,
        excluded_heldout=excluded,
        note=self_note(mix.self_play.n, outcomes["self"]),
    )


def self_note(asked: int, outcome: SourceOutcome) -> str:
    if not asked:
        return "self-proposal off"
    if not outcome.kept:
        reasons = ", ".join(f"{k} {v}" for k, v in outcome.rejected.items()) or "none recorded"
        return (
            f"0 of {outcome.candidates} self-proposals were valid ({reasons}); the round continues on its other sources"
        )
    return f"{outcome.kept} of {outcome.candidates} self-proposals valid"
