"""Model options from the trainer config: LoRA (PEFT) merged back into full
weights, dtype checks, and a base model that must already be on disk."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from touchstone.checkpoint import verify_checkpoint
from training.common import TrainingError
from training.model_options import ModelOptionError, resolve_base
from training.train import train


@pytest.mark.slow
def test_lora_training_saves_merged_full_weights_in_the_usual_format(tiny_model, data_dir, tmp_path):
    out = tmp_path / "lora"
    manifest = train(
        "sft",
        data_dir=data_dir,
        base=tiny_model,
        out=out,
        max_steps=2,
        config={"peft": {"r": 4, "lora_alpha": 8}, "learning_rate": 1e-2},
    )
    assert manifest == verify_checkpoint(out) and manifest.config["peft"]["r"] == 4
    assert not (out / "adapter_config.json").exists()  # merged: a plain Hugging Face checkpoint
    before, after = load_file(tiny_model / "model.safetensors"), load_file(out / "model.safetensors")
    assert before.keys() == after.keys()  # no lora_A/lora_B tensors left
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed and all("proj" in k or "lm_head" in k or "embed" in k for k in changed)


@pytest.mark.slow
def test_lora_on_the_top_layers_leaves_every_layer_below_them_as_it_was(tiny_model, data_dir, tmp_path):
    out = tmp_path / "top"
    train("sft", data_dir=data_dir, base=tiny_model, out=out, max_steps=2,
          config={"peft": {"r": 4, "lora_alpha": 8, "top_layers": 1}, "learning_rate": 1e-2})  # fmt: skip
    before, after = load_file(tiny_model / "model.safetensors"), load_file(out / "model.safetensors")
    layers = sorted({int(k.split(".layers.")[1].split(".")[0]) for k in before if ".layers." in k})
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(f".layers.{layers[-1]}." in k for k in changed)
    with pytest.raises(TrainingError, match=f"top_layers 99: the model has {len(layers)} layers"):
        train("sft", data_dir=data_dir, base=tiny_model, out=tmp_path / "o", config={"peft": {"top_layers": 99}})


def test_bad_model_options_are_named(tiny_model, data_dir, tmp_path):
    with pytest.raises(TrainingError, match="torch_dtype 'bf16'"):
        train("sft", data_dir=data_dir, base=tiny_model, out=tmp_path / "o", config={"torch_dtype": "bf16"})
    with pytest.raises(TrainingError, match="peft: unknown key.*rank"):
        train("sft", data_dir=data_dir, base=tiny_model, out=tmp_path / "o", config={"peft": {"rank": 4}})


@pytest.mark.parametrize("name", ["touchstone-tests/not-a-cached-model", "no such dir/../x"])
def test_a_base_outside_the_disk_and_the_local_cache_is_refused_not_downloaded(name):
    with pytest.raises(ModelOptionError, match="not in the local Hugging Face cache.*never download"):
        resolve_base(name)


@pytest.mark.slow
def test_an_experiment_s_peft_setting_trains_its_arms_as_lora_adapters(tiny_model, data_dir, tmp_path):
    from touchstone.experiments.filter_ablation import AblationConfig
    from training.common import experiment_train_config

    cfg = AblationConfig(max_steps=1, peft={"r": 4, "lora_alpha": 8, "top_layers": 1})
    manifest = train(
        "sft", data_dir=data_dir, base=tiny_model, out=tmp_path / "arm", config=experiment_train_config(cfg, 0)
    )
    assert manifest.config["peft"]["r"] == 4
    full = experiment_train_config(AblationConfig(max_steps=1), 0)
    assert "peft" not in full  # no setting: full fine-tuning, as before
