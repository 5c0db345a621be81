"""Round keys: r000, r001, ... (at least three digits). Every stage that names
a round (storage paths, Dagster partitions, proposer seeds, evaluation
history) parses and orders keys here."""

from __future__ import annotations

import re

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


def earlier_round_keys(keys, key: str, n: int) -> list[str]:
    """The last `n` of `keys` before `key`, oldest first."""
    before = sorted((k for k in keys if round_index(k) < round_index(key)), key=round_index)
    return before[len(before) - n :] if n > 0 else []
