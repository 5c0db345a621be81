"""DPO on (accepted, rejected) pairs of the same task with TRL's `DPOTrainer`.

The chats are rendered to text with the base tokenizer's chat template and
given to TRL as standard prompt/completion text: as Arrow structs, tool-call
arguments of different tools would be merged and null-filled, changing what
the template renders. The template is prefix-preserving, so the prompt text is
an exact prefix of prompt + completion.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from datasets import Dataset
from trl import DPOConfig, DPOTrainer

from touchstone.checkpoint import CheckpointManifest
from training.common import TrainingError, dataset_hashes, finish, load_base, load_overrides, read_rows, tensorboard, trl_args


def render(prompt: str, completion: str, tools: str, tokenizer) -> tuple[str, str]:
    """(prompt text ending with the assistant header, completion text ending with EOS)."""
    prompt_msgs, tool_list = json.loads(prompt), json.loads(tools)
    head = tokenizer.apply_chat_template(prompt_msgs, tools=tool_list, add_generation_prompt=True, tokenize=False)
    full = tokenizer.apply_chat_template(prompt_msgs + json.loads(completion), tools=tool_list, tokenize=False)
    if not full.startswith(head):
        raise TrainingError("the chat template does not render the prompt as a prefix of the full chat")
    # Trailing newline after the final end-of-turn: the completion then ends with EOS, as TRL expects.
    return head, full[len(head):].rstrip("\n")


def pair_dataset(rows: list[dict[str, Any]], tokenizer) -> Dataset:
    examples = []
    for row in rows:
        prompt, chosen = render(row["prompt"], row["chosen"], row["tools"], tokenizer)
        _, rejected = render(row["prompt"], row["rejected"], row["tools"], tokenizer)
        examples.append({"prompt": prompt, "chosen": chosen, "rejected": rejected})
    return Dataset.from_list(examples)


def train_dpo(data_dir: str | Path, base: str | Path, out: str | Path, round_key: str | None = None,
              config: str | Path | dict | None = None) -> CheckpointManifest:
    out = Path(out)
    model, tokenizer = load_base(base)
    dataset = pair_dataset(read_rows(data_dir, "dpo"), tokenizer)
    with tempfile.TemporaryDirectory(prefix="touchstone-dpo-") as work:
        args = trl_args(DPOConfig, Path(work), load_overrides(config), learning_rate=1e-4, max_length=4096)
        trainer = DPOTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
                             callbacks=[tensorboard(out)])
        result = trainer.train()
        return finish(trainer, out, base=base, round_key=round_key, datasets=dataset_hashes(data_dir, ["dpo"]),
                      method="dpo", metrics={"train_loss": result.training_loss, "steps": result.global_step,
                                             "pairs": len(dataset)})
