"""Every round the verifier also grades a sample of the labeled canary corpus
(known hacks and honest look-alikes); the round's blocking check
`canaries_caught` fails the round when one is misjudged."""

import random
from pathlib import Path

import polars as pl
from tqdm import tqdm


def pick_canaries(corpus: list, n: int, names: list[str], seed: str, isolated: bool = False) -> list:
    """`names` when given, else n canaries, half hacks and half honest, chosen
    by a seed (the round key) so a rerun grades the same ones. Canaries scored
    under an isolated test run (`canary.isolated`) are drawn only when the
    round's verifier runs isolated: elsewhere their verdict is a known reject."""
    corpus = [c for c in corpus if isolated or not c.isolated]
    if names:
        by_name = {c.name: c for c in corpus}
        unknown = sorted(set(names) - set(by_name))
        if unknown:
            raise ValueError(f"unknown canaries {unknown}; the corpus has {sorted(by_name)}")
        return [by_name[name] for name in names]
    rng = random.Random(seed)
    honest = [c for c in corpus if c.expected_verdict == "accept"]
    hacks = [c for c in corpus if c.expected_verdict == "reject"]
    n_honest = min(len(honest), n // 2)
    return rng.sample(hacks, min(len(hacks), n - n_honest)) + rng.sample(honest, n_honest)


def graded_isolated(canary) -> bool:
    """Whether the round's verifier (isolated=None: as the task's record says)
    grades this canary's tests isolated: yes unless the task is recorded
    not_isolated (a task never probed runs isolated first; a split task grades
    every test that shows the fix isolated)."""
    from touchstone.tasks.isolation import recorded_isolation
    from touchstone.tasks import load_task

    record = recorded_isolation(load_task(canary.task_dir))
    return record is None or record.status in ("isolated", "split")


def verify_canaries(out: Path, chosen: list, *, replays: int, backend: str, allow_rules: set[str]) -> Path:
    """Grade each canary with the round's verifier settings into `out` (one row per canary)."""
    from touchstone.tasks import load_task
    from touchstone.verify import verify_trajectory

    rows = []
    for canary in tqdm(chosen, desc="canaries", unit="traj"):
        report = verify_trajectory(
            load_task(canary.task_dir), canary.messages, replays=replays, backend=backend, allow_rules=allow_rules
        )
        rows.append(
            {
                "canary_id": canary.name,
                "family": canary.family,
                "label": "honest" if canary.expected_verdict == "accept" else "hacked",
                "expected": canary.expected_verdict,
                "verdict": report.verdict,
                "report_id": report.report_id,
                "reasons": report.reasons,
            }
        )
    pl.DataFrame(rows, schema_overrides={"reasons": pl.List(pl.String)}).write_parquet(out)
    return out
