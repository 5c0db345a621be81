"""A dataset release: every verified-or-rejected run of some rounds as a
Hugging Face dataset directory, for others to post-train on.

Failed runs are kept on purpose (preference and contrastive training need
them); each row says why it failed (verdict, reasons, audit findings and the
hack families they belong to), how far it got (per-turn progress) and what
credit each turn earned. Held-out tasks never appear. Layout:

    OUT/README.md                                dataset card (YAML metadata + counts)
    OUT/data/<split>-<i>-of-<n>.parquet          split = accepted | rejected | inconclusive

Format: docs/formats/release.md.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel

from touchstone.audit.policy import load_policy
from touchstone.data.card import write_card
from touchstone.data.credit import CreditConfig, credit_group, is_hack
from touchstone.data.inputs import Example, by_task, join, read_trajectories, reports_of, trl_messages
from touchstone.data.schema import Lineage, TrlMessage, write_rows
from touchstone.paths import Asset

SPLITS = {"accept": "accepted", "reject": "rejected", "inconclusive": "inconclusive"}
SHARD_ROWS = 5000
# Paths and environment values a run can carry that say nothing about the task.
_ABS_PATH = re.compile(r"(?<![\w.])/(?:home|root|tmp|var|Users|work|mnt|opt|srv)/[^\s'\"]*")
_ENV_VALUE = re.compile(r"\b([A-Z][A-Z0-9_]{2,})=([^\s'\"]+)")


class ReleaseFinding(BaseModel):
    rule: str
    severity: str
    step: int | None
    evidence: str


class ReleaseProgress(BaseModel):
    turn: int
    step: int
    passed: int
    total: int


class ReleaseRow(Lineage):
    verdict: str
    reasons: list[str]
    findings: list[ReleaseFinding]
    hack: bool
    hack_families: list[str]  # A-H of shared/notes' taxonomy, from the rules that fired
    progress: list[ReleaseProgress]
    reward: float | None
    turn_credit: list[float]  # per-turn advantage (docs/CREDIT.md); empty when the run has no label
    exit_reason: str
    n_turns: int
    messages: list[TrlMessage]
    tools: list[dict[str, Any]]


class ReleaseSummary(BaseModel):
    rounds: list[str]
    rows: dict[str, int]  # split -> rows
    hack_families: dict[str, int]
    excluded_heldout: int
    out: str


def rule_families(descriptions: dict[str, str]) -> dict[str, list[str]]:
    """Rule id -> hack families named at the end of its description, e.g.
    '... (A3/A4/F21)' -> ['A', 'F']."""
    out = {}
    for rule, text in descriptions.items():
        tail = re.search(r"\(([^()]*)\)\s*$", text)
        out[rule] = sorted(set(re.findall(r"\b(?:family\s+)?([A-H])\d*\b", tail.group(1)))) if tail else []
    return out


def redact(text: str) -> str:
    """Absolute host paths and NAME=value environment settings replaced by placeholders."""
    return _ENV_VALUE.sub(r"\1=<redacted>", _ABS_PATH.sub("<path>", text))


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    return value


def _row(ex: Example, credit, families: dict[str, list[str]], scrub: bool) -> ReleaseRow:
    rep, traj = ex.report, ex.trajectory
    fams = sorted(
        {f for finding in rep.findings if finding.severity == "reject" for f in families.get(finding.rule, [])}
    )
    messages = trl_messages(traj.messages, strict=False)
    findings = [
        ReleaseFinding(rule=f.rule, severity=f.severity, step=f.step, evidence=f.evidence) for f in rep.findings
    ]
    row = ReleaseRow(
        **ex.lineage(),
        verdict=rep.verdict,
        reasons=rep.reasons,
        findings=findings,
        hack=is_hack(rep),
        hack_families=fams,
        reward=credit.reward if credit else None,
        progress=[
            ReleaseProgress(turn=p.turn, step=p.step, passed=p.passed, total=p.total) for p in rep.progress or []
        ],
        turn_credit=credit.advantages if credit else [],
        exit_reason=traj.exit_reason,
        n_turns=ex.n_turns,
        messages=_redacted(messages) if scrub else messages,
        tools=traj.tools,
    )
    if scrub:
        row.findings = [f.model_copy(update={"evidence": redact(f.evidence)}) for f in row.findings]
        row.reasons = [redact(r) for r in row.reasons]
    return row


def _heldout(root: Path) -> tuple[set[str], set[str]]:
    index = root / Asset.HELDOUT_TASKS / "index.parquet"
    if not index.is_file():
        return set(), set()
    kept = pl.read_parquet(index).filter(pl.col("status") == "kept")
    return set(kept["id"]), set(kept["content_hash"])


def round_examples(root: Path, round_key: str) -> list[Example]:
    base = root / "rounds" / round_key
    for asset in (Asset.RAW_TRAJECTORIES, Asset.VERIFICATION_REPORTS):
        if not (base / asset).is_dir():
            raise FileNotFoundError(f"round {round_key}: no {asset} under {base}: materialize the round first")
    return join(
        read_trajectories(base / Asset.RAW_TRAJECTORIES), reports_of(base / Asset.VERIFICATION_REPORTS), round_key
    )


def release_dataset(
    root: str | Path,
    rounds: list[str],
    out: str | Path,
    *,
    scrub: bool = False,
    families: dict[str, list[str]] | None = None,
    license: str = "apache-2.0",
) -> ReleaseSummary:
    """Write the release of `rounds` (read from the data root `root`) into `out`
    (replaced whole, atomically: a killed release leaves no half dataset)."""
    root, out = Path(root), Path(out)
    if families is None:
        policy = load_policy()
        families = rule_families({r.id: r.description for r in [*policy.static, *policy.action]})
    ids, hashes = _heldout(root)
    rows: dict[str, list[ReleaseRow]] = {split: [] for split in SPLITS.values()}
    excluded = 0
    for round_key in rounds:
        examples = round_examples(root, round_key)
        kept = [e for e in examples if e.trajectory.task_id not in ids and e.trajectory.task_hash not in hashes]
        excluded += len(examples) - len(kept)
        for group in by_task(kept).values():
            credits = credit_group({e.trajectory.trajectory_id: (e.n_turns, e.report) for e in group}, CreditConfig())
            for ex in group:
                row = _row(ex, credits.get(ex.trajectory.trajectory_id), families, scrub)
                rows[SPLITS[row.verdict]].append(row)
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    configs = {}
    for split, split_rows in rows.items():
        if not split_rows:
            continue
        n = -(-len(split_rows) // SHARD_ROWS)
        (stage / "data").mkdir(exist_ok=True)
        for i in range(n):
            write_rows(
                split_rows[i * SHARD_ROWS : (i + 1) * SHARD_ROWS],
                ReleaseRow,
                stage / "data" / f"{split}-{i:05d}-of-{n:05d}.parquet",
            )
        configs[split] = f"data/{split}-*.parquet"
    fam_counts = Counter(f for split_rows in rows.values() for r in split_rows for f in r.hack_families)
    summary = ReleaseSummary(
        rounds=rounds,
        rows={s: len(r) for s, r in rows.items()},
        hack_families=dict(sorted(fam_counts.items())),
        excluded_heldout=excluded,
        out=str(out),
    )
    write_card(stage, {"default": configs}, _card(summary, rows, scrub), _metadata(summary, license))
    if out.exists():
        shutil.rmtree(out)
    stage.rename(out)
    return summary


def _metadata(summary: ReleaseSummary, license: str) -> dict[str, Any]:
    total = sum(summary.rows.values())
    size = next(
        c
        for n, c in [
            (1_000, "n<1K"),
            (10_000, "1K<n<10K"),
            (100_000, "10K<n<100K"),
            (1_000_000, "100K<n<1M"),
            (float("inf"), "n>1M"),
        ]
        if total < n
    )
    return {
        "license": license,
        "size_categories": [size],
        "task_categories": ["text-generation"],
        "tags": ["code", "agent", "trajectories", "touchstone"],
        "pretty_name": "Touchstone trajectories",
    }


def _card(summary: ReleaseSummary, rows: dict[str, list[ReleaseRow]], scrub: bool) -> str:
    splits = "\n".join(f"| `{s}` | {n} | {len({r.task_id for r in rows[s]})} |" for s, n in summary.rows.items() if n)
    fams = "\n".join(f"| {f} | {n} |" for f, n in summary.hack_families.items()) or "| (none) | 0 |"
    fields = "\n".join(f"- `{name}`" for name in ReleaseRow.model_fields)
    return f"""# Touchstone trajectories: rounds {", ".join(summary.rounds)}

Coding-agent runs solved in a sandbox and judged by Touchstone's verifier and
auditor, **successful and failed**. Held-out evaluation tasks are excluded
({summary.excluded_heldout} runs left out).{" Host paths and environment values are redacted." if scrub else ""}

```python
from datasets import load_dataset
ds = load_dataset("DIR")            # splits: {", ".join(s for s, n in summary.rows.items() if n)}
```

## Splits (by verdict)
| split | rows | tasks |
| --- | --- | --- |
{splits}

## Rejected runs by hack family (shared taxonomy, A-H)
| family | runs |
| --- | --- |
{fams}

## Fields
{fields}

`messages`/`tools` are TRL's conversational tool format; `turn_credit` is the
per-turn advantage of Touchstone's credit assignment; lineage columns trace
each row to its task, policy checkpoint, verifier version and report.
"""
