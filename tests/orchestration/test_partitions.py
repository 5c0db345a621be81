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
