"""benchmarks/run.py: each area's section of docs/BENCHMARKS.md is replaced alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import run


def test_sections_are_added_then_replaced_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(run, "DOC", tmp_path / "BENCHMARKS.md")
    rows = [
        {"backend": "bwrap", "median_ms": 4.25},
        {"backend": "docker", "median_ms": 60.0},
        {"backend": "bwrap", "lifecycles_per_s": 9.5},
    ]
    run.write_section(
        "sandbox", run.section("sandbox", {"results": rows, "notes": ["met"]}, "", "2026-01-01 00:00", 3, "m")
    )
    run.write_section("tasks", run.section("tasks", None, "exit status 1:\nboom", "2026-01-01 00:00", 1, "m"))
    first = run.DOC.read_text()
    assert first.startswith("# Benchmarks") and first.index("## sandbox") < first.index("## tasks")
    assert "| backend | median_ms |" in first and "| docker | 60 |" in first  # rows with equal keys: one table
    assert "| backend | lifecycles_per_s |" in first and "- met" in first and "boom" in first
    run.write_section("sandbox", run.section("sandbox", {"results": [{"x": 1}]}, "", "2026-01-02 00:00", 3, "m"))
    second = run.DOC.read_text()
    assert "| x |" in second and "median_ms" not in second and "boom" in second
    assert second.index("## sandbox") < second.index("## tasks")


def test_areas_put_sandbox_first():
    found = run.areas()
    assert found[0] == "sandbox" and set(found) >= {"sandbox"}
