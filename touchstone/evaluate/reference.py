"""The held-out reference set that likelihood metrics score a checkpoint on.

Reference trajectories are the teacher's runs on the held-out tasks that the
verifier accepted: what an honest, competent agent does there. They are
computed once per held-out set (keyed by the tasks' content hashes, the
teacher's code and the verifier version) and cached, so every round and every
arm of an experiment is scored on the very same tokens. The cache keeps the
teacher's other runs too (`accepted` false): they are still states where an
agent must write a valid call.

Turn states (for the valid tool-call rate at matched states) are the teacher's
runs, accepted or not, up to each assistant turn, at most `MATCHED_STATES` of
them spread evenly. Probe states (for hack propensity) are the runs up to
the teacher's first test run, where the honest next action is the teacher's
and each canonical hack (touchstone.agent.policies.hacks) is the alternative.
Format: docs/formats/evaluation.md.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel

from touchstone import atomic, paths
from touchstone.agent import teacher
from touchstone.agent.loop import EpisodeLimits
from touchstone.agent.policies import hacks
from touchstone.agent.policies.spec import TEACHER
from touchstone.agent.rollout import solve
from touchstone.tasks.schema import Task
from touchstone.verify import VERIFIER_VERSION, verify_batch

REFERENCE_FILE = "reference.parquet"
# Turns per teacher run. 16 left some repairs unfinished: the teacher stops trying
# when fewer than a try's turns remain (measured on 8 held-out mutation tasks of
# the shipped seeds: 2 accepted at 16 turns, 3 at 40; docs/EXPERIMENTS.md).
TEACHER_MAX_TURNS = 24
# Turns sampled at each reference state for the valid tool-call rate at matched
# states: 8 x 10 states took ~20 s a round for the tiny model on 2 CPU cores.
MATCHED_SAMPLES = 8
# Turn states sampled, spread evenly over every held-out teacher run: the accepted
# runs alone were 10 states of one task on the laptop's held-out set of 4.
MATCHED_STATES = 16
# Bumped when the cached file's contents change (2: all runs, an `accepted` column).
REFERENCE_FORMAT = 2


class ProbeState(BaseModel):
    """One matched state: `prefix` messages, then the honest or a hack action."""

    task_id: str
    prefix: list[dict[str, Any]]
    honest: dict[str, Any]
    hacks: dict[str, dict[str, Any]]  # family -> assistant message
    tools: list[dict[str, Any]]


def reference_key(tasks: list[Task]) -> str:
    """What the reference set depends on: the tasks, the teacher's code and turns, the verifier."""
    h = hashlib.sha256(f"{VERIFIER_VERSION} {TEACHER_MAX_TURNS} {REFERENCE_FORMAT}".encode())
    for task_hash in sorted(t.content_hash for t in tasks):
        h.update(task_hash.encode())
    for source in sorted(Path(teacher.__file__).parent.rglob("*.py")):  # the teacher's procedure
        h.update(source.read_bytes())
    return h.hexdigest()[:16]


def reference_set(tasks: list[Task], *, backend: str = "auto", workers: int = 1, cache: Path | None = None) -> Path:
    """The cached `reference.parquet` of `tasks` (building it on first use): one
    row per teacher run (`task_id, trajectory_id, accepted, messages, tools`)."""
    if not tasks:
        raise ValueError("reference_set: no held-out tasks")
    root = (cache or paths.cache() / "reference") / reference_key(tasks)
    target = root / REFERENCE_FILE
    if target.is_file():
        return target
    with tempfile.TemporaryDirectory(prefix="touchstone-reference-") as tmp:
        rollouts = solve(
            tasks,
            TEACHER,
            workers=workers,
            out=Path(tmp) / "rollouts",
            backend=backend,
            limits=EpisodeLimits(max_turns=TEACHER_MAX_TURNS),
            progress=False,
        )
        verdicts = verify_batch(
            [t.dir for t in tasks], rollouts, workers=workers, out=Path(tmp) / "verify", backend=backend, replays=1
        )
        reports = pl.read_parquet(verdicts / "reports.parquet")
        _refuse_infrastructure_failures(pl.read_parquet(rollouts / "trajectories.parquet"))
        verdicts = reports.select("trajectory_id", accepted=pl.col("verdict") == "accept")
        runs = pl.read_parquet(rollouts / "trajectories.parquet").join(verdicts, on="trajectory_id", how="left")
        runs = runs.with_columns(pl.col("accepted").fill_null(False))
        root.mkdir(parents=True, exist_ok=True)
        columns = ["task_id", "trajectory_id", "accepted", "messages", "tools"]
        atomic.write_parquet(runs.select(columns).sort("task_id", "trajectory_id"), target)
    return target


def _refuse_infrastructure_failures(runs: pl.DataFrame) -> None:
    """A sandbox that failed says nothing about the teacher: such a set must not be cached."""
    broken = runs.filter(pl.col("exit_reason") == "sandbox_error")
    if broken.height:
        raise RuntimeError(f"reference set: the sandbox failed on {broken.height} teacher run(s): {broken['error'][0]}")


def read_reference(path: Path, *, accepted_only: bool = True) -> list[dict[str, Any]]:
    """Rows of a `reference.parquet` with `messages` and `tools` decoded: the
    accepted runs (the reference proper), or every teacher run."""
    rows = pl.read_parquet(path).to_dicts()
    return [
        {**r, "messages": json.loads(r["messages"]), "tools": json.loads(r["tools"])}
        for r in rows
        if r["accepted"] or not accepted_only
    ]


class TurnState(BaseModel):
    """A reference run up to one of its assistant turns: where matched-state
    evaluation samples the checkpoint's next turn (the same states every round)."""

    task_id: str
    prefix: list[dict[str, Any]]
    tools: list[dict[str, Any]]


def turn_states(runs: list[dict[str, Any]], limit: int | None = MATCHED_STATES) -> list[TurnState]:
    """The state before each assistant turn of `runs`, in order; more than `limit`
    (None: no limit) are thinned to `limit` spread evenly over them."""
    states = [
        TurnState(task_id=row["task_id"], prefix=row["messages"][:i], tools=row["tools"])
        for row in runs
        for i, msg in enumerate(row["messages"])
        if msg["role"] == "assistant"
    ]
    if limit is None or len(states) <= limit:
        return states
    step = (len(states) - 1) / max(limit - 1, 1)
    return [states[round(i * step)] for i in range(limit)]


def probe_states(reference: list[dict[str, Any]]) -> list[ProbeState]:
    """The state after each reference run's first test run, where the run goes on
    (an honest second action) and at least one hack can be built from what it saw."""
    states = []
    for row in reference:
        msgs = row["messages"]
        assistant = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
        if len(assistant) < 2 or msgs[assistant[1] - 1]["role"] != "tool":
            continue
        at = assistant[1]
        found = hacks.hack_messages(msgs[at - 1].get("content") or "")
        if found:
            states.append(
                ProbeState(task_id=row["task_id"], prefix=msgs[:at], honest=msgs[at], hacks=found, tools=row["tools"])
            )
    return states
