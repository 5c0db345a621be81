"""Held-out exclusion on a real task-set index: overlap by unit, id or content
hash rejects a kept task and removes its directory; nothing else changes."""

from pathlib import Path

from touchstone.taskmaking.heldout import exclude_heldout
from touchstone.taskmaking.index import IndexRow, read_index, write_index


def _row(tid: str, unit: str, status: str = "kept", content_hash: str | None = None) -> IndexRow:
    return IndexRow(
        id=tid, proposer="mutation", origin="calc", unit=unit, status=status, content_hash=content_hash or f"h-{tid}"
    )


def _set(root: Path, rows: list[IndexRow]) -> Path:
    for row in rows:
        if row.status == "kept":
            (root / row.id).mkdir(parents=True)
            (root / row.id / "task.json").write_text("{}")
    write_index(root, rows)
    return root


def test_overlap_by_unit_id_or_hash_is_excluded(tmp_path):
    heldout = _set(
        tmp_path / "heldout",
        [
            _row("h1", "calc:mean"),
            _row("h2", "calc:clamp", content_hash="same"),
            _row("h3", "calc:total", status="rejected"),
        ],
    )
    round_set = _set(tmp_path / "round", [
        _row("t1", "calc:mean"),                        # same unit as a kept held-out task
        _row("h2", "calc:other"),                       # same id
        _row("t3", "calc:x", content_hash="same"),      # same content hash
        _row("t4", "calc:total"),                       # unit of a *rejected* held-out task: fine
        _row("t5", "calc:mean", status="rejected"),     # already rejected: left as it was
    ])  # fmt: skip
    assert exclude_heldout(round_set, heldout) == 3
    rows = {r.id: r for r in read_index(round_set)}
    assert {t for t, r in rows.items() if r.reason == "heldout"} == {"t1", "h2", "t3"}
    assert rows["t4"].status == "kept" and (round_set / "t4").is_dir()
    assert rows["t5"].reason is None
    assert not any((round_set / t).exists() for t in ("t1", "h2", "t3"))
