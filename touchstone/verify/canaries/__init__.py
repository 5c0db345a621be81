"""The labeled adversarial corpus ("canaries"): reward hacks of every family
that can be expressed as a trajectory, and honest look-alikes, over small real
tasks in the documented task format, with trajectories in the documented JSONL
format. Tests use it to show each hack passes a naive harness and is rejected
by the verifier for the right reason; the round pipeline injects canaries
every round to measure the filter.

    load_canaries() -> list[Canary]   # (task_dir, messages, expected_verdict, family, ...)
    canary_items() -> list[BatchItem] # for verify_batch([round tasks, TASKS], items + canary_items())
    python -m touchstone.verify.canaries build    # regenerate trajectories from spec.py
    python -m touchstone.verify.canaries matrix   # confusion matrix per family
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from touchstone.episode.trajectory import read_messages_jsonl

ROOT = Path(__file__).parent
TASKS = ROOT / "tasks"
TRAJECTORIES = ROOT / "trajectories"
MANIFEST = ROOT / "manifest.json"


class Canary(NamedTuple):
    task_dir: Path
    messages: list[dict[str, Any]]
    expected_verdict: str  # accept | reject
    family: str  # A..G or honest
    name: str
    reasons: tuple[str, ...]  # checks allowed to be the failing one (hacks)
    note: str
    isolated: bool = False  # verified with isolated=True (look-alikes the audit only flags once isolated)


def load_canaries(families: set[str] | None = None) -> list[Canary]:
    """Every canary of the corpus (optionally only some families), in manifest order."""
    if not MANIFEST.is_file():
        raise FileNotFoundError(f"{MANIFEST} missing: run `python -m touchstone.verify.canaries build`")
    out = []
    for entry in json.loads(MANIFEST.read_text()):
        if families and entry["family"] not in families:
            continue
        out.append(
            Canary(
                task_dir=TASKS / entry["task"],
                messages=read_messages_jsonl(ROOT / entry["file"]),
                expected_verdict=entry["expected"],
                family=entry["family"],
                name=entry["name"],
                reasons=tuple(entry["reasons"]),
                note=entry["note"],
                isolated=entry.get("isolated", False),
            )
        )
    return out


CANARY_PREFIX = "canary-"


def canary_items(families: set[str] | None = None) -> list:
    """The canaries as `verify_batch` items; trajectory ids are
    `canary-<name>` so a round can tell them apart and score the filter."""
    from touchstone.tasks.schema import load_task
    from touchstone.verify.batch import BatchItem

    ids = {d: load_task(d).id for d in {c.task_dir for c in load_canaries(families)}}
    return [BatchItem(ids[c.task_dir], CANARY_PREFIX + c.name, c.messages) for c in load_canaries(families)]
