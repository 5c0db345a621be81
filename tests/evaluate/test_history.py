"""The evaluation history a round's report shows: earlier rounds only, oldest first."""

import polars as pl

from tests.evaluate.test_metrics import _attempts
from touchstone.evaluate import earlier_rounds, round_metrics


def _table(key: str, solved: list[bool]) -> pl.DataFrame:
    metrics = round_metrics(_attempts({"a": solved}), round_key=key, checkpoint_hash=None, k=len(solved))
    return pl.DataFrame([metrics.flat()])


def test_only_rounds_before_this_one_oldest_first_through_the_parquet_row_format():
    tables = {
        key: _table(key, solved)
        for key, solved in {
            "r010": [True, True],
            "r002": [True, False],
            "r000": [False, False],
            "r011": [True, True],
        }.items()
    }
    history = earlier_rounds(tables, "r010")
    assert [m.round for m in history] == ["r000", "r002"]
    assert [m.pass_at_1.value for m in history] == [0.0, 0.5]
    assert earlier_rounds(tables, "r000") == []
