"""The warm start: a brief SFT of the default tiny model on verified teacher runs
of seed tasks that are never held out, before round 0 (asset `base_model`).

Why: a freshly initialized 0.9M-parameter model has never seen the agent's
tool-call format, and round 0's few verified runs (about half of its 8 tasks on
the shipped seeds) are all it would learn it from. The warm start shows it
other tasks' runs first, so the rounds' own data moves a model that already
writes calls (docs/EXPERIMENTS.md, "Making `make demo` show learning").
A real base (`of_configured_base`) is warm-started the same way, on reference
demonstrations instead of the teacher's runs (`demonstrations: reference`,
training/demonstrations.py): labelled rows that teach the call format only.

It runs a round's own stages (training/round_engine.py, the functions the
round's assets call), so it goes through the same filter: mutation tasks
validated from the seeds with their own random stream, every task sharing a
source unit with a held-out task excluded, the teacher's runs graded by the
verifier; only accepted runs become SFT rows. The result is cached per machine
under the hash of everything it depends on (the base weights, the seeds, the
held-out set's units and ids, the code of the teacher, the round engine and this
module, the verifier version and the verifier's and audit's code, the settings).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

import touchstone.verify
from touchstone import audit, harness, paths
from touchstone.agent import teacher
from touchstone.agent.loop import EpisodeLimits
from touchstone.agent.policies.spec import TEACHER
from touchstone.checkpoint import checkpoint_hash
from touchstone.data.build import build_datasets
from touchstone.hashing import tree_hash
from touchstone.sandbox.image import build_lock
from touchstone.taskmaking.curriculum import Shown, show_functions
from touchstone.taskmaking.index import INDEX_FILE, read_index
from touchstone.taskmaking.sources import SourceMix
from touchstone.tasks.schema import load_task_set
from training import demonstrations, round_engine
from training.round_engine import Sandboxes, propose, roll_out, verify

# Its own task stream: rounds seed the proposer with 0, 1, ...; the held-out set with 1_000_000.
WARM_START_RNG_SEED = 2_000_000
RESULT_FILE = "warm_start.json"
# The `round` of the warm start's SFT rows: rounds replay them (touchstone.data.replay), and
# a row's round says where it came from.
WARM_START_ROUND = "warm-start"
TASKS_FILE = "tasks.parquet"  # the warm start's task index, next to its SFT rows
KEY_FILE = "key.json"  # the hashed parts of its cache key, next to the model


class WarmStartConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n_tasks: int = Field(
        8,
        ge=0,
        description="Seed tasks (never held out) whose verified runs warm-start the model; 0: none.",
    )
    # Brief on purpose: 90 steps on ~5 accepted runs (~40 windows of 1024 tokens, about 45 s on a
    # 2-core CPU) leave the format barely learned (valid calls 0.05), so the rounds' training
    # visibly teaches the rest (120 steps: 0.84 at round 0, then 0.67 and 0.79; docs/EXPERIMENTS.md)
    max_steps: int = Field(90, ge=1, description="SFT steps of the warm start, on the accepted runs.")
    # From scratch the format is learned at a high rate (2e-3 constant; docs/EXPERIMENTS.md);
    # rounds then continue gently at the trainer's own rate.
    learning_rate: float = Field(
        2e-3,
        gt=0,
        description="The warm start's learning rate (from scratch; rounds continue at trainer.learning_rate).",
    )
    teacher_max_turns: int = Field(16, ge=1, description="Turn limit of the scripted teacher's episodes.")
    demonstrations: Literal["teacher", "reference"] = Field(
        "teacher",
        description="Whose runs it trains on: the scripted teacher's, or each task's reference fix as one "
        "str_replace + submit on the task made level 1 or 0 (training/demonstrations.py; privileged, labelled "
        "replay:reference-fix): what a real base learns the call format from.",
    )
    level: Shown = Field(
        "shown",
        description="Curriculum level of its tasks for reference demonstrations (touchstone.taskmaking.curriculum): "
        "shown (level 1), the statement shows the buggy function; line (level 0), the buggy lines themselves; "
        "fix (level -1), the buggy lines and their fix.",
    )
    rng_seed: int = WARM_START_RNG_SEED
    operators: list[str] = Field(
        default_factory=list, description="Kinds of bug of its tasks (empty: all; as proposed_tasks' option)."
    )


class WarmStartResult(BaseModel):
    """What the warm start did (OUT/warm_start.json next to the weights)."""

    key: str
    base_hash: str  # the weights it started from
    tasks: int  # kept tasks after held-out units were excluded
    excluded_heldout: int
    runs: int
    accepted: int
    rows: int  # SFT rows trained on
    trained: bool  # False: the verifier accepted nothing; the weights are the base's
    checkpoint_hash: str


def warm_start(
    base: Path,
    *,
    seeds: list,
    heldout: Path | None,
    trainer_config: dict,
    cfg: WarmStartConfig,
    backend: str = "auto",
    workers: int = 1,
    log: Callable[[str], None] = print,
) -> tuple[Path, WarmStartResult]:
    """The warm-started checkpoint of `base` (cached) and what went into it."""
    parts = _key_parts(base, seeds, heldout, trainer_config, cfg)
    key = _key(parts)
    root = paths.cache() / "warm-start" / key
    root.parent.mkdir(parents=True, exist_ok=True)
    with build_lock(f"warm-start-{key}"):  # one builder per key: a concurrent caller waits, then reuses it
        if (root / "model" / RESULT_FILE).is_file():
            log(f"warm start: cached ({root})")
            return root / "model", WarmStartResult.model_validate_json((root / "model" / RESULT_FILE).read_text())
        log(f"warm start: not cached as {key}; {_why_missed(root.parent, parts)}")
        with tempfile.TemporaryDirectory(prefix="touchstone-warm-", dir=root.parent) as tmp:
            work = Path(tmp)
            result = _run(base, work, key, seeds, heldout, trainer_config, cfg, backend, workers, log)
            (work / "model" / RESULT_FILE).write_text(result.model_dump_json(indent=2) + "\n")
            shutil.rmtree(root, ignore_errors=True)  # a half-written earlier attempt
            root.mkdir()
            (work / "data").rename(root / "data")
            (root / KEY_FILE).write_text(json.dumps(parts, indent=2) + "\n")  # what a later miss is compared with
            (work / "model").rename(root / "model")  # last: a model dir means a finished warm start
    return root / "model", result


def rows_of(model: Path) -> Path:
    """The data dir of a warm-started `model` (its SFT rows and task index), beside the weights."""
    return model.parent / "data"


def _run(base, work, key, seeds, heldout, trainer_config, cfg, backend, workers, log) -> WarmStartResult:
    from training.train import train  # torch on use: a round's resources import this module for its config

    whose = "the teacher's runs" if cfg.demonstrations == "teacher" else "reference demonstrations"
    log(f"warm start: {cfg.n_tasks} seed tasks, {whose}, {cfg.max_steps} SFT steps")
    sandboxes = Sandboxes(backend=backend, workers=workers)
    mix = SourceMix(procedural=cfg.n_tasks, operators=cfg.operators)
    proposed = propose(work / "tasks", mix, sandboxes, seeds=seeds, heldout=heldout, rng_seed=cfg.rng_seed)
    limits = EpisodeLimits(max_turns=cfg.teacher_max_turns)
    if cfg.demonstrations == "reference":
        show_functions(work / "tasks", cfg.level)  # the statement shows where the fix goes
    tasks = load_task_set(work / "tasks")
    if cfg.demonstrations == "reference":
        rollouts = demonstrations.demonstrate_fixes(work / "tasks", work / "rollouts", backend=backend, limits=limits)
    else:
        rollouts = roll_out(tasks, TEACHER, 1, work / "rollouts", sandboxes, limits=limits, progress=True)
    verify(work / "tasks", rollouts, work / "verify", sandboxes)
    reports = work / "verify" / "reports.parquet"
    summary = build_datasets(reports, rollouts / "trajectories.parquet", work / "data", round_key=WARM_START_ROUND)
    shutil.copy(work / "tasks" / INDEX_FILE, work / "data" / TASKS_FILE)  # lineage: which tasks, which kept
    rows = summary.datasets["sft"].rows
    if rows:
        config = {**trainer_config, "max_steps": cfg.max_steps, "learning_rate": cfg.learning_rate}
        train("sft", data_dir=work / "data", base=base, out=work / "model", config=config)
    else:
        log("warm start: the verifier accepted no run; the base weights are kept")
        shutil.copytree(base, work / "model")
    log(f"warm start: {summary.verdicts.get('accept', 0)}/{summary.inputs} runs accepted, {rows} rows")
    return WarmStartResult(
        key=key,
        base_hash=checkpoint_hash(base),
        tasks=len(tasks),
        excluded_heldout=proposed.excluded_heldout,
        runs=summary.inputs,
        accepted=summary.verdicts.get("accept", 0),
        rows=rows,
        trained=bool(rows),
        checkpoint_hash=checkpoint_hash(work / "model"),
    )


def _package_sources(*packages) -> list[Path]:
    return [f for package in packages for f in sorted(Path(package.__file__).parent.rglob("*.py"))]


def _key_parts(base: Path, seeds: list, heldout: Path | None, trainer_config: dict, cfg: WarmStartConfig) -> dict:
    """What the warm start depends on, one hash per part, so a miss can say which part changed."""

    def digest(*chunks: str | bytes) -> str:
        h = hashlib.sha256()
        for chunk in chunks:
            h.update(chunk.encode() if isinstance(chunk, str) else chunk)
        return h.hexdigest()[:16]

    seed_parts = []
    for seed in seeds:
        root = Path(seed[0] if isinstance(seed, tuple) else seed)
        env = seed[1].model_dump_json() if isinstance(seed, tuple) and seed[1] is not None else ""
        seed_parts.append(f"{tree_hash(root) if root.is_dir() else root} {env}")
    kept = ""
    if heldout is not None and (heldout / INDEX_FILE).is_file():
        # What exclusion looks at, minus the content hash: a statement quotes the failing tests'
        # output, object addresses included (`<function ... at 0x7fba51aa5940>`), so the same
        # held-out set proposed on a fresh data root hashed differently and missed the cache.
        kept = "\n".join(sorted(f"{r.unit} {r.id}" for r in read_index(heldout) if r.status == "kept"))
    # the stages it runs (the round engine's) are its code too
    code = [Path(__file__), Path(round_engine.__file__), Path(demonstrations.__file__),
            *sorted(Path(teacher.__file__).parent.rglob("*.py"))]  # fmt: skip
    return {
        "verifier_version": digest(str(touchstone.verify.VERIFIER_VERSION)),
        # The verifier's, the audit's and the test harness's code, not only their version string: a fix that changes
        # which runs are accepted or guarded changes the rows (5 -> 4 rows for the demo's warm
        # start between f541f11 and d9df47f, under one VERIFIER_VERSION; docs/EXPERIMENTS.md).
        "verifier_code": digest(*(f.read_bytes() for f in _package_sources(touchstone.verify, audit, harness))),
        "base_weights": checkpoint_hash(base),
        "settings": digest(json.dumps(cfg.model_dump(), sort_keys=True, default=str)),
        "trainer_config": digest(json.dumps(trainer_config, sort_keys=True, default=str)),
        "seeds": digest(*seed_parts),
        "heldout_set": digest(kept),
        "teacher_and_warm_start_code": digest(*(source.read_bytes() for source in code)),
    }


def _key(parts: dict) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _why_missed(cache: Path, parts: dict) -> str:
    """Which parts differ from the newest cached warm start (there is one to compare with)."""
    cached = sorted(cache.glob(f"*/{KEY_FILE}"), key=lambda p: p.stat().st_mtime)
    if not cached:
        return "nothing cached yet"
    newest = json.loads(cached[-1].read_text())
    changed = [name for name in parts if newest.get(name) != parts[name]]
    return f"the newest cached one ({cached[-1].parent.name}) differs in: {', '.join(changed) or 'nothing'}"
