"""Round keys and their registration on a real (ephemeral) Dagster instance."""

import dagster as dg
import pytest

from orchestration.partitions import previous_round, register_round, registered_rounds, round_index, round_key


def test_keys_sort_and_chain():
    assert round_key(0) == "r000" and round_key(12) == "r012" and round_key(1000) == "r1000"
    assert round_index("r1000") == 1000
    assert previous_round("r000") is None and previous_round("r010") == "r009"


@pytest.mark.parametrize("bad", ["r1", "round0", "R000", "r-01", ""])
def test_bad_keys_are_rejected_with_the_key_named(bad):
    with pytest.raises(ValueError, match="bad round key"):
        round_index(bad)


def test_register_next_is_idempotent_for_explicit_keys():
    instance = dg.DagsterInstance.ephemeral()
    assert register_round(instance) == "r000"
    assert register_round(instance) == "r001"
    assert register_round(instance, "r001") == "r001"
    assert register_round(instance, "r010") == "r010"
    assert register_round(instance) == "r011"
    assert registered_rounds(instance) == ["r000", "r001", "r010", "r011"]


def test_finished_rounds_are_those_with_an_evaluation():
    """What `round run --total` counts, and the round `--control` defaults to: an interrupted
    round (registered, stages materialized, no evaluation) is not finished."""
    from orchestration.lineage import EVALUATION, evaluated_rounds, unfinished_round

    instance = dg.DagsterInstance.ephemeral()
    for _ in range(3):
        register_round(instance)
    for key in ("r000", "r001"):
        instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=EVALUATION, partition=key))
    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key="proposed_tasks", partition="r002"))
    assert evaluated_rounds(instance) == ["r000", "r001"] and unfinished_round(instance) == "r002"
    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=EVALUATION, partition="r002"))
    assert evaluated_rounds(instance) == ["r000", "r001", "r002"] and unfinished_round(instance) is None


def test_round_run_refuses_key_with_total_before_running_anything(tmp_path):
    from click.testing import CliRunner

    from cli import main

    env = {"TOUCHSTONE_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "dh")}
    result = CliRunner().invoke(main, ["round", "run", "--rounds", "3", "--total", "--key", "r001"], env=env)
    assert result.exit_code == 2 and "--key names one round and --total counts them all" in result.output
    assert not (tmp_path / "home").exists()
