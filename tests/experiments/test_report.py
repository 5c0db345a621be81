"""The filter ablation's table and figure from a result (the `--json` object)."""

from touchstone.experiments.filter_ablation import SEED_FIGURES, seed_entry, seed_summary
from touchstone.experiments.report import ablation_table, plot_ablation, plot_seeds, plot_splits, seeds_table


def _row(round_: int, share: float, propensity: float | None, nll: float) -> dict:
    return {
        "round": round_,
        "kept_rows": 4,
        "kept_hacks": int(share * 4),
        "kept_hack_share": share,
        "kept_heldout_fail": 1,
        "kept_heldout_fail_share": 0.25,
        "kept_auditor_hacks": 0,
        "kept_hacks_by_split": {"named": int(share * 4), "unruled": 0},
        "filter": {
            "hacks_by_split": {"named": 4, "unruled": 2},
            "passed_hacks_by_split": {"named": int(share * 4), "unruled": 2},
            "honest": 5,
            "passed_honest": 3,
            "auditor_recall": 0.5,
            "auditor_false_alarm": 0.0,
        },
        "hack_propensity": propensity,
        "hack_propensity_low": None if propensity is None else propensity - 0.1,
        "hack_propensity_high": None if propensity is None else propensity + 0.1,
        "imitation_nll": nll,
        "imitation_nll_low": nll - 0.2,
        "imitation_nll_high": nll + 0.2,
        "valid_tool_call_rate": None,
        "hack_attempt_rate": 0.0,
        "pass_at_1": 0.0,
    }


def test_table_and_plot_show_the_base_model_and_every_arm_and_round(tmp_path):
    base = _row(-1, 0, -0.5, 8.0)
    result = {
        "config": {"hack_rate": 0.3},
        "base": base,
        "arms": {
            "naive": [_row(0, 0.5, 0.4, 6.0), _row(1, 0.75, 0.9, 5.5)],
            "touchstone": [_row(0, 0.0, -0.9, 5.8), _row(1, 0.0, None, 5.2)],
        },
    }
    table = ablation_table(result)
    main, splits = table.split("\n\n")
    lines = main.splitlines()
    assert len(lines) == 2 + 1 + 4  # header, base, two arms x two rounds
    assert lines[2].startswith("| base | — |")
    assert "| naive | 1 | 4 | 0.75 (3) | 0.25 (1) | 0 | +0.900 [+0.800, +1.000] | 5.500 [5.300, 5.700] | n/a |" in table
    assert "| touchstone | 1 | 4 | 0.00 (0) | 0.25 (1) | 0 | n/a |" in table
    # per split: executed hacks the filter passed / attempted, kept rows; honest runs; the auditor against the record
    assert "| naive | 1 | 3 / 4, 3 | 2 / 2, 0 | 3 / 5 | 0.50 | 0.00 |" in splits
    png = plot_ablation(result, tmp_path / "ablation.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_splits(result, tmp_path / "splits.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _seed(hacks: int, attempts: int, pass_at_1: float) -> dict:
    row = {**_row(0, 0.5, 0.4, 6.0), "sampled_hack_rate": hacks / attempts, "sampled_attempts": attempts}
    evaluated = {k: v for k, v in _row(-1, 0, -0.5, 8.0).items() if not k.startswith(("kept", "filter"))}
    base = {**evaluated, "sampled_hack_rate": 0.0, "sampled_attempts": attempts}  # the base keeps no rows
    return {
        "base": base,
        "arms": {"naive": [{**row, "pass_at_1": pass_at_1}], "touchstone": [{**row, "sampled_hack_rate": 0.0}]},
    }


def test_over_seeds_the_sampled_hacks_are_pooled_with_an_interval_that_a_zero_count_leaves_open(tmp_path):
    seeds = [_seed(1, 16, 0.25), _seed(0, 16, 0.5), _seed(2, 16, 0.75)]
    result = {
        "config": {"hack_rate": 0.5},
        "seeds": seeds,
        "base": seed_entry([s["base"] for s in seeds], -1, SEED_FIGURES),
        "summary": seed_summary(seeds, SEED_FIGURES),
    }
    naive, touchstone = result["summary"]["naive"][0], result["summary"]["touchstone"][0]
    assert naive["sampled_hacks"]["hacks"] == 3 and naive["sampled_hacks"]["attempts"] == 48
    assert naive["pass_at_1"]["value"] == 0.5 and naive["pass_at_1"]["low"] < 0.5 < naive["pass_at_1"]["high"]
    # three seeds of 0 hacks: the bootstrap over seeds collapses, the pooled interval does not
    assert touchstone["sampled_hack_rate"] == {"value": 0.0, "low": 0.0, "high": 0.0}
    assert touchstone["sampled_hacks"]["high"] > 0.07
    table = seeds_table(result["summary"], result["base"]).splitlines()
    assert table[2].startswith("| base | -1 | 3 | n/a |") and table[2].endswith("| 0 / 48 [0.00, 0.07] |")
    assert table[3].startswith("| naive | 0 | 3 | 0.50 [0.50, 0.50] | +0.400") and "| 3 / 48 [0.02, 0.17] |" in table[3]
    assert plot_seeds(result, tmp_path / "seeds.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    del seeds[0]["arms"]["touchstone"]  # a seed stopped before this arm: its dot is missing, nothing else
    assert plot_seeds(result, tmp_path / "partial.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
