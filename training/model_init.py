"""The default model: a tiny Qwen2-architecture causal LM with a byte-level BPE
tokenizer trained on code, built deterministically and offline.

Why this shape: TRL recognises chat templates by their exact text, so the
tokenizer carries TRL's shipped Qwen2.5 template and its special tokens; with
them TRL's assistant-only masks (SFT) and tool-call parsing (GRPO, `transformers
serve`) work on a model we can build without the Hub. Real users point
`base_model` at any Hugging Face checkpoint directory instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sysconfig
from collections.abc import Iterator
from itertools import chain
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from tqdm import tqdm
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX
from trl.chat_template_utils import add_response_schema, qwen2_5_chat_template

from touchstone import paths
from touchstone.checkpoint import write_manifest

# Control tokens of the Qwen2.5 template. Chat delimiters are "special" (skipped
# when decoding content); the tool markup tokens are not, exactly as in Qwen2.5,
# so decoded text keeps `<tool_call>` and the response parser can find it.
CONTROL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TOOL_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tools>", "</tools>"]

VOCAB_SIZE = 4096
CORPUS_BYTES = 3_000_000  # enough code for sensible merges, trains in seconds
# Copies of the agent's own text (tools, call format, the teacher's commands) in
# the tokenizer's corpus: enough that BPE merges `bash`, `arguments`, `command`,
# `PYTHONDONTWRITEBYTECODE`, `grep`, `exclude`... into single tokens. Without them
# the first call is ~70 pieces of 1-3 characters, which the tiny model garbles
# (`DONDON...`), and a look-up ~150 (docs/EXPERIMENTS.md).
AGENT_TEXT_COPIES = 200
SEEDS_DIR = Path(__file__).resolve().parent.parent / "touchstone" / "tasks" / "seeds"


def code_files() -> list[Path]:
    """The training corpus, in a fixed order: task seed sources (if the task
    engineer's seeds exist) then top-level standard library modules, capped."""
    seeds = sorted(SEEDS_DIR.rglob("*.py")) if SEEDS_DIR.is_dir() else []
    stdlib = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    chosen, total = [], 0
    for path in seeds + stdlib:
        size = path.stat().st_size
        if total + size > CORPUS_BYTES:
            continue
        chosen.append(path)
        total += size
    return chosen


def _texts(files: list[Path]) -> Iterator[str]:
    for path in files:
        yield path.read_text(encoding="utf-8", errors="replace")


def agent_text() -> str:
    """What the agent reads and writes apart from code: the system prompt, the
    tool schemas, one call of each tool, and one of each action the teacher takes
    (`phrasebook`: its thoughts and commands), in the chat template's format."""
    from touchstone.agent.loop import SYSTEM_PROMPT
    from touchstone.agent.teacher.procedure import phrasebook
    from touchstone.episode.tools import TOOL_SCHEMAS

    def call(name: str, args: dict) -> str:
        return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"

    tools = [
        call(s["function"]["name"], dict.fromkeys(s["function"]["parameters"]["properties"], "")) for s in TOOL_SCHEMAS
    ]
    actions = [f"{a.thought}\n{call(a.tool, a.args)}" for a in phrasebook()]
    return "\n".join([SYSTEM_PROMPT, json.dumps(TOOL_SCHEMAS), *tools, *actions]) + "\n"


def train_tokenizer(files: list[Path]) -> PreTrainedTokenizerFast:
    # Exactly Qwen2's pipeline: `AutoTokenizer` loads a qwen2 model's tokenizer
    # as `Qwen2Tokenizer`, which rebuilds normalizer and pre-tokenizer this way;
    # any other pipeline would tokenize differently after a save/load.
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=CONTROL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(chain(_texts(files), [agent_text()] * AGENT_TEXT_COPIES), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        extra_special_tokens=["<|im_start|>"],
        model_max_length=32768,
    )
    fast.add_tokens(TOOL_TOKENS)
    fast.chat_template = qwen2_5_chat_template
    # Lets `tokenizer.parse_response` (TRL's tool loop, `transformers serve`) split tool calls.
    return add_response_schema(fast)


def build_model(tokenizer: PreTrainedTokenizerFast, seed: int) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    eos = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def pretrain(model, tokenizer, files: list[Path], steps: int, seed: int, seq_len: int = 256, batch: int = 8) -> float:
    """A brief next-token pass over the code so the model writes Python-shaped
    text. Returns the last loss. Deterministic: fixed seed, fixed chunk order."""
    # Tokenize only what the steps can use (4x headroom for sampling), in corpus order.
    budget, ids_list = 4 * steps * batch * seq_len, []
    for text in _texts(files):
        ids_list += tokenizer(text)["input_ids"]
        if len(ids_list) >= budget:
            break
    ids = torch.tensor(ids_list)
    n_chunks = len(ids) // seq_len
    chunks = ids[: n_chunks * seq_len].view(n_chunks, seq_len)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    loss = torch.tensor(float("nan"))
    for _ in tqdm(range(steps), desc="pretrain", disable=steps == 0):
        batch_ids = chunks[torch.randint(n_chunks, (batch,), generator=gen)]
        loss = model(input_ids=batch_ids, labels=batch_ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()
    return loss.item()


def init_model(out: str | os.PathLike, seed: int = 0, pretrain_steps: int = 0) -> Path:
    """Build the default tiny model into `out` (weights, tokenizer, chat
    template, and a checkpoint manifest with round -1). Same inputs, same bytes."""
    out = Path(out)
    files = code_files()
    tokenizer = train_tokenizer(files)
    model = build_model(tokenizer, seed)
    loss = pretrain(model, tokenizer, files, pretrain_steps, seed) if pretrain_steps else None
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_manifest(
        out,
        round_key=None,
        parent=None,
        datasets={},
        config={"kind": "init", "seed": seed, "pretrain_steps": pretrain_steps, "corpus_files": len(files)},
        metrics={} if loss is None else {"pretrain_loss": loss},
    )
    return out


def default_model(seed: int = 0, pretrain_steps: int = 0) -> Path:
    """The default model, built once per machine into the cache and reused
    (tests and round 0 call this). Built in a temp dir and renamed, so a
    half-written model is never seen."""
    # Keyed by this builder's own source and the agent text it trains the tokenizer on,
    # so a changed recipe never reuses a stale build.
    recipe = hashlib.sha256(Path(__file__).read_bytes() + agent_text().encode()).hexdigest()[:10]
    target = paths.cache() / "models" / f"tiny-qwen2-{recipe}-s{seed}-p{pretrain_steps}"
    if (target / "checkpoint.json").is_file():
        return target
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
    init_model(tmp, seed=seed, pretrain_steps=pretrain_steps)
    try:
        tmp.rename(target)
    except OSError:  # another process finished first; theirs is identical
        shutil.rmtree(tmp, ignore_errors=True)
    return target
