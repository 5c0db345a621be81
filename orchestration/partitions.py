"""Rounds are dynamic partitions with keys r000, r001, ... .

Dagster cannot make a dynamically partitioned asset depend on its own previous
partition (dagster-io/dagster#15079), so "previous round" is computed here and
resolved against the instance's materialization records (see lineage.py).
The key format itself is domain knowledge: `touchstone.rounds`.
"""

from __future__ import annotations

import dagster as dg

from touchstone.rounds import previous_round, round_index, round_key

__all__ = [
    "previous_round",
    "round_index",
    "round_key",
    "register_round",
    "registered_rounds",
    "next_round_key",
    "rounds_partitions",
]

ROUNDS_PARTITIONS_NAME = "rounds"
rounds_partitions = dg.DynamicPartitionsDefinition(name=ROUNDS_PARTITIONS_NAME)


def registered_rounds(instance: dg.DagsterInstance) -> list[str]:
    keys = instance.get_dynamic_partitions(ROUNDS_PARTITIONS_NAME)
    return sorted(keys, key=round_index)


def next_round_key(instance: dg.DagsterInstance) -> str:
    keys = registered_rounds(instance)
    return round_key(round_index(keys[-1]) + 1 if keys else 0)


def register_round(instance: dg.DagsterInstance, key: str | None = None) -> str:
    """Register `key` (default: the next round) on the instance; idempotent."""
    key = key or next_round_key(instance)
    round_index(key)  # validate before touching the instance
    if not instance.has_dynamic_partition(ROUNDS_PARTITIONS_NAME, key):
        instance.add_dynamic_partitions(ROUNDS_PARTITIONS_NAME, [key])
    return key


# The filter-ablation experiment (assets/ablation.py): one partition per arm and round, e.g. naive|r001.
ABLATION_ROUNDS_NAME = "ablation_rounds"
ablation_partitions = dg.MultiPartitionsDefinition(
    {
        "arm": dg.StaticPartitionsDefinition(["naive", "touchstone"]),
        "round": dg.DynamicPartitionsDefinition(name=ABLATION_ROUNDS_NAME),
    }
)
