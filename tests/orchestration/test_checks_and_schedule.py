"""The rules behind the blocking checks, and the schedule that starts rounds."""

import dagster as dg
import polars as pl

from orchestration.checks import verified_rows_problems
from orchestration.partitions import registered_rounds
from orchestration.schedules import next_round_request

REPORTS = pl.DataFrame(
    {
        "trajectory_id": ["ok1", "ok2", "bad1", "odd1"],
        "report_id": ["r-ok1", "r-ok2", "r-bad1", "r-odd1"],
        "verdict": ["accept", "accept", "reject", "inconclusive"],
    }
)


def _sft(ids: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"trajectory_id": ids, "report_id": [f"r-{i}" for i in ids]})


def test_exactly_the_accepted_runs_pass():
    datasets = {
        "sft": _sft(["ok1", "ok2"]),
        "kto": pl.DataFrame(
            {"trajectory_id": ["ok1", "bad1"], "report_id": ["r-ok1", "r-bad1"], "label": [True, False]}
        ),
        "rl": _sft(["ok1", "bad1"]),
    }
    assert verified_rows_problems(datasets, REPORTS, {"verdict_reject": 1, "verdict_inconclusive": 1}) == {}


def test_documented_drops_reconcile_but_silent_losses_do_not():
    assert verified_rows_problems({"sft": _sft(["ok1"])}, REPORTS, {"duplicate": 1}) == {}
    problems = verified_rows_problems({"sft": _sft(["ok1"])}, REPORTS, {})
    assert problems["sft_does_not_reconcile"]["accepted"] == 2


def test_rows_from_unaccepted_runs_or_with_a_foreign_report_are_named():
    problems = verified_rows_problems({"sft": _sft(["ok1", "ok2", "bad1"])}, REPORTS, {})
    assert problems["sft_positive_not_accepted"] == ["bad1"]
    wrong_report = _sft(["ok1", "ok2"]).with_columns(report_id=pl.lit("r-bad1"))
    assert "sft_report_mismatch" in verified_rows_problems({"sft": wrong_report}, REPORTS, {})
    rl = verified_rows_problems({"sft": _sft(["ok1", "ok2"]), "rl": _sft(["odd1"])}, REPORTS, {})
    assert rl == {"rl_unverified": ["odd1"]}


def test_schedule_registers_the_next_round_only_after_the_last_was_evaluated():
    instance = dg.DagsterInstance.ephemeral()
    first = next_round_request(instance)
    assert isinstance(first, dg.RunRequest) and first.partition_key == "r000"
    skipped = next_round_request(instance)
    assert isinstance(skipped, dg.SkipReason) and "r000" in skipped.skip_message
    assert registered_rounds(instance) == ["r000"]
    instance.report_runless_asset_event(dg.AssetMaterialization("round_evaluation", partition="r000"))
    second = next_round_request(instance)
    assert isinstance(second, dg.RunRequest) and second.partition_key == "r001"
    assert second.run_key == "r001"


def test_the_sensor_requests_the_next_round_key_instead_of_registering_it():
    from orchestration.sensors import continuous_rounds

    instance = dg.DagsterInstance.ephemeral()
    result = continuous_rounds(dg.build_sensor_context(instance=instance))
    assert isinstance(result, dg.SensorResult) and [r.partition_key for r in result.run_requests] == ["r000"]
    (add,) = result.dynamic_partitions_requests
    assert add.partition_keys == ["r000"] and registered_rounds(instance) == []
    instance.add_dynamic_partitions("rounds", ["r000"])  # what Dagster does with the request
    skipped = continuous_rounds(dg.build_sensor_context(instance=instance))
    assert isinstance(skipped, dg.SkipReason) and "r000" in skipped.skip_message
