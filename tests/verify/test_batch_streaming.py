"""verify_batch reads trajectories as it verifies them and spools each report
to disk: memory per trajectory is the sort key, not the trajectory or its report.
Trajectories of unknown tasks are reported without a sandbox, which makes
thousands of them cheap here; every report is still a row, in (task, trajectory) order."""

import tracemalloc

import polars as pl

from touchstone.verify.batch import BatchItem, read_reports, verify_batch
from touchstone.verify.canaries import TASKS

MESSAGES = [{"role": "user", "content": "x" * 4000}]


def _batch(n: int):
    return (BatchItem(f"gone-{i % 7}", f"t-{i:05d}", MESSAGES) for i in range(n))


def test_memory_does_not_grow_with_the_trajectories_and_every_report_is_kept_in_order(tmp_path):
    def peak(n: int) -> int:
        tracemalloc.start()
        verify_batch(TASKS, _batch(n), 2, tmp_path / str(n), progress_bar=False)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    peak(10)  # first use: imports and caches
    small, large = peak(1024), peak(4096)
    # Each trajectory carries 4 KB of messages and a ~1 KB report; held, they would add 5+ KB each.
    assert (large - small) / (4096 - 1024) < 1024, (small, large)
    reports = pl.read_parquet(tmp_path / "4096" / "reports.parquet")
    assert reports.height == 4096 and set(reports["verdict"]) == {"inconclusive"}
    keys = list(zip(reports["task_id"], reports["trajectory_id"]))
    assert keys == sorted(keys) and len(set(keys)) == 4096
    assert pl.read_parquet(tmp_path / "4096" / "checks.parquet").height == 4096
    assert [r.trajectory_id for r in read_reports(tmp_path / "4096")][:2] == ["t-00000", "t-00007"]
