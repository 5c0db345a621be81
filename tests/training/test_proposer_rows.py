"""One model trains on both roles: the solver's runs and the proposer's
episodes share rl.parquet and dpo.parquet (column `role`), and the trainers
take both, the proposer's rendered with the chat template (no tools) or from
its recorded token ids."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from tests.data.fixtures import write_selfplay_round
from touchstone.checkpoint import verify_checkpoint
from touchstone.data.build import build_datasets
from training.common import read_rows
from training.rl import PGConfig, turn_samples
from training.train import train


@pytest.mark.parametrize("method", ["rl", "dpo"])
def test_one_model_trains_on_solver_and_proposer_rows(method, tiny_model, tmp_path):
    tasks, reports, trajectories = write_selfplay_round(tmp_path)
    data = tmp_path / "data"
    build_datasets(reports, trajectories, data, round_key="r001", proposals=tasks)
    rows = read_rows(data, method)
    assert {r["role"] for r in rows} == {"solver", "proposer"}
    if method == "rl":
        tok = AutoTokenizer.from_pretrained(tiny_model)
        args = PGConfig(output_dir=str(tmp_path / "w"), use_cpu=True)
        by_id = {r["trajectory_id"]: r for r in rows}
        recorded, _ = turn_samples(by_id["p-learn"], tok, args)  # its token ids, as the policy sampled them
        assert recorded[0]["input_ids"] == [1, 2, 3, 4, 5] and recorded[0]["completion_mask"] == [0, 0, 0, 1, 1]
        [rendered], _ = turn_samples(by_id["p-bad"], tok, args)  # rendered: the proposal is the completion
        completion = [t for t, m in zip(rendered["input_ids"], rendered["completion_mask"]) if m]
        assert "proposal p-bad" in tok.decode(completion) and rendered["advantages"][-1] < 0
    out = tmp_path / "ckpt"
    train(method, data_dir=data, base=tiny_model, out=out, round_key="r001", max_steps=1)
    assert verify_checkpoint(out).config["method"] == method
