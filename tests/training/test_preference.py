"""DPO and KTO through TRL on the round's preference data."""

from __future__ import annotations

import pytest
import torch
from click.testing import CliRunner
from transformers import AutoModelForCausalLM, AutoTokenizer

from cli import main
from touchstone.checkpoint import content_hash, verify_checkpoint


def _changed(a, b):
    sa, sb = AutoModelForCausalLM.from_pretrained(a).state_dict(), AutoModelForCausalLM.from_pretrained(b).state_dict()
    return any(not torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("method", ["dpo", "kto"])
def test_cli_trains_a_checkpoint(method, tiny_model, data_dir, tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("max_steps: 2\nper_device_train_batch_size: 2\nlearning_rate: 0.001\n")
    out = tmp_path / "ckpt"
    result = CliRunner().invoke(main, ["train", method, "--data", str(data_dir), "--base", str(tiny_model),
                                       "--out", str(out), "--config", str(cfg), "--round", "r0"])
    assert result.exit_code == 0, result.output
    manifest = verify_checkpoint(out)
    assert manifest.config["method"] == method and manifest.metrics["steps"] == 2
    assert manifest.datasets == {method: content_hash(data_dir / f"{method}.parquet")}
    assert _changed(tiny_model, out)
    assert AutoTokenizer.from_pretrained(out).chat_template == AutoTokenizer.from_pretrained(tiny_model).chat_template
