"""`build_datasets`: reports + trajectories -> sft/rl/dpo/kto Parquet files and
a summary, written atomically into one directory."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from touchstone.data.card import write_card
from touchstone.data.inputs import Example, join, read_trajectories, reports_of
from touchstone.data.preference import build_dpo, build_kto
from touchstone.data.rl import build_rl
from touchstone.data.schema import DataConfig, DPORow, KTORow, RLRow, SFTRow, write_rows
from touchstone.data.proposer import (
    PROPOSER_REWARDS_FILE,
    build_proposer_dpo,
    build_proposer_rl,
    proposer_rewards,
    write_rewards,
)
from touchstone.data.selfplay_report import SelfPlayReport, markdown, selfplay_report
from touchstone.data.sft import build_sft
from touchstone.taskmaking.index import read_index
from touchstone.taskmaking.proposers.selfplay import read_proposals
from touchstone.verify.report import TRAINING_GUARDS

BUILDERS = {"sft": (build_sft, SFTRow), "rl": (build_rl, RLRow), "dpo": (build_dpo, DPORow), "kto": (build_kto, KTORow)}
SUMMARY_FILE = "summary.json"
SELFPLAY_FILE = "selfplay.md"


class DatasetSummary(BaseModel):
    rows: int
    tokens: int | None  # sum of n_tokens where the dataset records it
    tasks: int
    dropped: dict[str, int]
    # who wrote the rows' runs (`row_author`): expert iteration trains on the model's own runs,
    # and a report must show how much of a round's data that is (teacher rows are an option)
    authors: dict[str, int] = {}

    @property
    def own_share(self) -> float | None:
        """The share of rows written by the model itself (None: no rows)."""
        return self.authors.get(MODEL, 0) / self.rows if self.rows else None


MODEL, TEACHER, TEACHER_CORRECTED, OTHER = "model", "teacher", "teacher-corrected", "other"


def row_author(policy: str) -> str:
    """Who wrote a run: `model` (a checkpoint: `hf:`, `openai:`), `teacher`, `teacher-corrected`
    (the teacher acting, a learner's malformed calls kept) or `other` (replayed outputs, the
    experiments' instruments)."""
    scheme = policy.partition(":")[0]  # a record's policy, in `PolicySpec`'s text form
    if scheme == "teacher":
        return TEACHER
    if scheme == "corrected":
        return TEACHER_CORRECTED
    return MODEL if scheme in ("hf", "openai") else OTHER


class BuildSummary(BaseModel):
    round: str | None
    inputs: int
    verdicts: dict[str, int]
    reject_reasons: dict[str, int]  # failed check name -> runs
    hacks: int
    # report guard (isolation+oracle / isolation / split_isolation / oracle / in_process / untested) -> runs
    guards: dict[str, int]
    excluded_unguarded: int  # runs left out of every dataset: guard "none" (see DataConfig.include_unguarded)
    datasets: dict[str, DatasetSummary]
    config: dict[str, Any]
    self_play: SelfPlayReport | None = None  # the round's proposals, when it had a self source

    def nothing_to_train(self, dataset: str) -> str | None:
        """Why `dataset` holds no row to train on (the round makes no update), or None.
        An empty dataset is a finding about the round, not a broken build: every
        accepted run is in SFT or in its documented drops (checked on training_data)."""
        if self.datasets[dataset].rows:
            return None
        verdicts = ", ".join(f"{n} {v}" for v, n in sorted(self.verdicts.items())) or "no runs"
        reasons = ", ".join(f"{r} {n}" for r, n in list(self.reject_reasons.items())[:3])
        drops = self.datasets[dataset].dropped.items()
        dropped = ", ".join(f"{r} {n}" for r, n in drops if not r.startswith("verdict_"))  # verdicts said above
        return (
            f"no {dataset} row to train on: {self.inputs} runs verified ({verdicts})"
            + (f"; rejected for {reasons}" if reasons else "")
            + (f"; dropped: {dropped}" if dropped else "")
        )


def read_summary(data_dir: Path) -> BuildSummary:
    """The summary `build_datasets` wrote into a built dataset directory."""
    return BuildSummary.model_validate_json((Path(data_dir) / SUMMARY_FILE).read_text())


def summarize(
    examples: list[Example],
    frames: dict[str, tuple[list[BaseModel], Counter]],
    cfg: DataConfig,
    round_key: str | None,
    excluded: int,
) -> BuildSummary:
    reports = [e.report for e in examples]
    reasons = Counter(reason.split(":", 1)[0] for r in reports if r.verdict == "reject" for reason in r.reasons)
    return BuildSummary(
        round=round_key,
        inputs=len(examples),
        verdicts=dict(Counter(r.verdict for r in reports)),
        reject_reasons=dict(reasons.most_common()),
        hacks=sum(any(f.severity == "reject" for f in r.findings) for r in reports),
        guards=dict(Counter(r.guard or "untested" for r in reports)),
        excluded_unguarded=excluded,
        datasets={
            name: DatasetSummary(
                rows=len(rows),
                tokens=sum(r.n_tokens for r in rows) if "n_tokens" in model.model_fields else None,
                tasks=len({r.task_id for r in rows}),
                dropped=dict(dropped),
                authors=dict(Counter(row_author(r.policy) for r in rows)),
            )
            for name, (rows, dropped) in frames.items()
            for model in [BUILDERS[name][1]]
        },
        config=cfg.model_dump(),
    )


def split_unguarded(examples: list[Example], cfg: DataConfig) -> tuple[list[Example], list[Example]]:
    """(kept, excluded): only runs whose guard is one a sceptical reviewer
    keeps (`TRAINING_GUARDS`: the test verdict came from a process the
    candidate could not reach) are training data unless the config says so."""
    if cfg.include_unguarded:
        return examples, []
    kept = [e for e in examples if e.report.guard is None or e.report.guard in TRAINING_GUARDS]
    return kept, [e for e in examples if e.report.guard is not None and e.report.guard not in TRAINING_GUARDS]


def build_datasets(
    reports: str | Path,
    trajectories: str | Path,
    out: str | Path,
    round_key: str | None = None,
    config: DataConfig | None = None,
    proposals: str | Path | None = None,
) -> BuildSummary:
    """Write OUT/{sft,rl,dpo,kto}.parquet and OUT/summary.json; with `proposals`
    (the round's task set, holding proposals.parquet when it had a self source)
    also the proposer's rows, OUT/proposer_rewards.parquet and OUT/selfplay.md."""
    cfg = config or DataConfig()
    examples = join(read_trajectories(trajectories), reports_of(reports), round_key)
    kept, unguarded = split_unguarded(examples, cfg)
    frames = {name: build(kept, cfg) for name, (build, _) in BUILDERS.items()}
    for name, (_, dropped) in frames.items():  # SFT accounts for accepted runs only
        n = sum(e.report.verdict == "accept" for e in unguarded) if name == "sft" else len(unguarded)
        if n:
            dropped["unguarded"] += n
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report = add_proposer_rows(frames, Path(proposals), kept, cfg, out) if proposals else None
    for name, (rows, _) in frames.items():
        write_rows(rows, BUILDERS[name][1], out / f"{name}.parquet")
    summary = summarize(examples, frames, cfg, round_key, len(unguarded)).model_copy(update={"self_play": report})
    (out / SUMMARY_FILE).write_text(json.dumps(summary.model_dump(), indent=2) + "\n")
    write_card(out, {name: f"{name}.parquet" for name in BUILDERS}, _card_body(summary))
    return summary


def add_proposer_rows(frames: dict, task_dir: Path, examples: list[Example], cfg: DataConfig, out: Path):
    """Proposer RL rows and DPO pairs appended to the solver's (from verified
    outcomes only: `examples` are the guarded runs); the rewards and the
    report's self-play section written next to them. None without proposals."""
    proposals = read_proposals(task_dir)
    if not proposals:
        return None
    index = read_index(task_dir)
    rewards = proposer_rewards(proposals, index, examples, cfg.proposer)
    for name, (rows, dropped) in (
        ("rl", build_proposer_rl(rewards, proposals, index)),
        ("dpo", build_proposer_dpo(rewards, proposals, index, cfg.max_pairs_per_task)),
    ):
        frames[name][0].extend(rows)
        frames[name][1].update({f"proposer_{k}": v for k, v in dropped.items()})
    write_rewards(rewards, out / PROPOSER_REWARDS_FILE)
    report = selfplay_report(rewards, index, examples, task_dir)
    (out / SELFPLAY_FILE).write_text(markdown(report))
    return report


def _card_body(summary: BuildSummary) -> str:
    rows = "\n".join(f"| `{name}` | {d.rows} | {d.tasks} |" for name, d in summary.datasets.items())
    return (
        f"# Touchstone training data, round {summary.round or '(none)'}\n\n"
        "Verified agent runs in TRL's conversational format (docs/formats/datasets.md).\n"
        '`datasets.load_dataset(DIR, "sft")`, or `trl sft --dataset_name DIR --dataset_config sft`.\n\n'
        f"| config | rows | tasks |\n| --- | --- | --- |\n{rows}\n"
    )
