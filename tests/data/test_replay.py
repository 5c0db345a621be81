"""Replay: a round trains on its verified rows, then earlier rounds' rows, each
keeping its own round; the result reads and tokenizes as any SFT dataset."""

from __future__ import annotations


from transformers import AutoTokenizer

from tests.training.conftest import copy_as_round, data_dir, tiny_model  # noqa: F401 (fixtures)
from touchstone.data.replay import replay_dataset
from training.common import read_dataset
from training.sft import tokenize_dataset


def test_replayed_rows_keep_their_round_and_train(data_dir, tiny_model, tmp_path):  # noqa: F811
    n_now = copy_as_round(data_dir, tmp_path / "r002", "r002")
    n_old = copy_as_round(data_dir, tmp_path / "r000", "r000")
    (tmp_path / "r001").mkdir()  # a round that kept no file: skipped
    counts = replay_dataset(tmp_path / "r002", [tmp_path / "r000", tmp_path / "r001"], tmp_path / "out")
    assert counts == {"r002": n_now, "r000": n_old}
    rows = read_dataset(tmp_path / "out", "sft")
    assert [r["round"] for r in rows] == ["r002"] * n_now + ["r000"] * n_old
    assert rows[0]["messages"] == read_dataset(data_dir, "sft")[0]["messages"]  # decoded as objects, unchanged
    dataset, _ = tokenize_dataset(rows, AutoTokenizer.from_pretrained(tiny_model), 4096)
    assert len(dataset) == n_now + n_old
