"""Rounds are dynamic partitions with keys r000, r001, ... .

Dagster cannot make a dynamically partitioned asset depend on its own previous
partition (dagster-io/dagster#15079), so "previous round" is computed here and
resolved against the instance's materialization records (see lineage.py).
"""

from __future__ import annotations

import re

import dagster as dg

ROUNDS_PARTITIONS_NAME = "rounds"
rounds_partitions = dg.DynamicPartitionsDefinition(name=ROUNDS_PARTITIONS_NAME)

_KEY = re.compile(r"^r(\d{3,})$")


def round_key(index: int) -> str:
    if index < 0:
        raise ValueError(f"round index must be >= 0, got {index}")
    return f"r{index:03d}"


def round_index(key: str) -> int:
    match = _KEY.match(key)
    if match is None:
        raise ValueError(f"bad round key {key!r}: expected 'r' and at least three digits, e.g. r000")
    return int(match.group(1))


def previous_round(key: str) -> str | None:
    index = round_index(key)
    return round_key(index - 1) if index > 0 else None


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
