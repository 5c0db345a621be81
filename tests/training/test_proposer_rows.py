"""One model trains on both roles: the solver's runs and the proposer's
episodes share rl.parquet and dpo.parquet (column `role`), and the trainers
take both, the proposer's rendered with the chat template (no tools) or from
its recorded token ids."""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

from tests.data.fixtures import write_selfplay_round
from touchstone.agent.policies.spec import PolicySpec
from touchstone.checkpoint import verify_checkpoint
from touchstone.data.build import build_datasets
from training.common import read_dataset
from training.rl import PGConfig, turn_samples
from training.train import train


@pytest.mark.parametrize("method", ["rl", "dpo"])
def test_one_model_trains_on_solver_and_proposer_rows(method, tiny_model, tmp_path):
    tasks, reports, trajectories = write_selfplay_round(tmp_path)
    data = tmp_path / "data"
    build_datasets(reports, trajectories, data, round_key="r001", proposals=tasks)
    rows = read_dataset(data, method)
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


def test_the_tiny_model_proposes_and_zero_valid_is_a_result(tiny_model, tmp_path):
    """The laptop default as proposer: the real tiny model answers both prompts
    (its token ids recorded); none of its answers is a task, which the round
    reports plainly instead of failing."""
    from touchstone.agent.policies import make_policy
    from touchstone.episode.trajectory import Sampling
    from touchstone.taskmaking.proposers.selfplay import SelfPlayConfig, read_proposals
    from touchstone.taskmaking.sources import SourceMix, propose_round

    policy = make_policy(PolicySpec.parse(f"hf:{tiny_model}"), Sampling(max_tokens=48, seed=3))
    try:
        summary = propose_round(
            tmp_path / "tasks",
            SourceMix(procedural=0, self_play=SelfPlayConfig(n=2, group_size=2)),
            seeds=None,
            heldout=None,
            policy=policy,
        )
    finally:
        policy.close()
    records = read_proposals(tmp_path / "tasks")
    assert [r.reason for r in records] == ["malformed", "malformed"]
    assert all(r.checkpoint_hash == policy.checkpoint_hash and r.policy == str(policy.spec) for r in records)
    assert all(json.loads(r.turn)["completion_ids"] for r in records)
    assert summary.note.startswith("0 of 2 self-proposals were valid") and summary.outcomes["self"].kept == 0
