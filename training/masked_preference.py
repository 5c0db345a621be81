"""DPO and KTO on conversational rows with the loss on the model's own tokens.

TRL's preference trainers score every completion token, and a completion here
is a whole agent run: tool observations (test output, file contents) are the
environment's text, not the model's, so rewarding or penalizing their
likelihood teaches nothing about acting. Rows are tokenized here with the
chat template's assistant masks (as SFT is), and the collators use those masks
as TRL's `completion_mask`. Everything else (losses, reference model, KL
estimate, logging) is TRL's own.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from datasets import Dataset
from trl import DPOTrainer, KTOTrainer
from trl.trainer.dpo_trainer import DataCollatorForPreference
from trl.trainer.kto_trainer import DataCollatorForUnpairedPreference

from training.common import TrainingError, right_pad
from training.sft import training_template


def tokenize_completion(
    prompt: list[dict], completion: list[dict], tools: list[dict], tokenizer, template: str
) -> tuple[list[int], list[int], list[int]]:
    """(prompt ids ending with the assistant header, completion ids, 1 on the
    completion's assistant tokens and 0 on tool observations)."""
    head = tokenizer.apply_chat_template(
        prompt, tools=tools, chat_template=template, add_generation_prompt=True, tokenize=True, return_dict=True
    )["input_ids"]
    full = tokenizer.apply_chat_template(
        prompt + completion,
        tools=tools,
        chat_template=template,
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    ids, mask = list(full["input_ids"]), list(full["assistant_masks"])
    if ids[: len(head)] != list(head):
        raise TrainingError("the chat template does not render the prompt as a prefix of the full chat")
    return list(head), ids[len(head) :], mask[len(head) :]


def _masks(
    examples: list[dict], prompt_key: str, mask_key: str, max_length: int | None, keep_end: bool, width: int
) -> torch.Tensor:
    """Prompt zeros + the completion's assistant mask, cut like TRL cuts the
    ids, right-padded to the batch width TRL chose."""
    rows = []
    for ex in examples:
        m = [0] * len(ex[prompt_key]) + list(ex[mask_key])
        if max_length is not None:
            m = m[-max_length:] if keep_end else m[:max_length]
        rows.append(torch.tensor(m, dtype=torch.long))
    return right_pad(rows, 0, width)


@dataclasses.dataclass
class MaskedPreferenceCollator(DataCollatorForPreference):
    def torch_call(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        out = super().torch_call(examples)
        keep_end = self.truncation_mode == "keep_end"
        width = out["completion_mask"].shape[1]
        chosen = _masks(examples, "prompt_ids", "chosen_mask", self.max_length, keep_end, width)
        rejected = _masks(examples, "prompt_ids", "rejected_mask", self.max_length, keep_end, width)
        out["completion_mask"] = torch.cat([chosen, rejected])
        return out


@dataclasses.dataclass
class MaskedUnpairedCollator(DataCollatorForUnpairedPreference):
    def torch_call(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        out = super().torch_call(examples)
        for prefix in ("", "KL_"):
            if f"{prefix}completion_mask" in out:
                width = out[f"{prefix}completion_mask"].shape[1]
                out[f"{prefix}completion_mask"] = _masks(
                    examples, "prompt_ids", f"{prefix}completion_assistant_mask", self.max_length, False, width
                )
        return out


def _drop_long_prompts(dataset: Dataset, max_length: int | None) -> Dataset:
    return dataset if max_length is None else dataset.filter(lambda ex: len(ex["prompt_ids"]) < max_length)


class MaskedDPOTrainer(DPOTrainer):
    """`DPOTrainer` whose log-probabilities cover the runs' assistant tokens only."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.data_collator = MaskedPreferenceCollator(**dataclasses.asdict(self.data_collator))

    def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
        template = training_template(processing_class)

        def tokenize(row):
            prompt_ids, chosen_ids, chosen_mask = tokenize_completion(
                row["prompt"], row["chosen"], row["tools"], processing_class, template
            )
            _, rejected_ids, rejected_mask = tokenize_completion(
                row["prompt"], row["rejected"], row["tools"], processing_class, template
            )
            return {
                "prompt_ids": prompt_ids,
                "chosen_ids": chosen_ids,
                "rejected_ids": rejected_ids,
                "chosen_mask": chosen_mask,
                "rejected_mask": rejected_mask,
            }

        tokenized = dataset.map(tokenize, remove_columns=dataset.column_names, desc=f"tokenize dpo {dataset_name}")
        return _drop_long_prompts(tokenized, args.max_length)

    def _set_signature_columns_if_needed(self):
        super()._set_signature_columns_if_needed()
        self._signature_columns = [*self._signature_columns, "chosen_mask", "rejected_mask"]


class MaskedKTOTrainer(KTOTrainer):
    """`KTOTrainer` whose log-probabilities cover the runs' assistant tokens only."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.data_collator = MaskedUnpairedCollator(**dataclasses.asdict(self.data_collator))

    def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
        template = training_template(processing_class)

        def tokenize(row):
            prompt_ids, ids, mask = tokenize_completion(
                row["prompt"], row["completion"], row["tools"], processing_class, template
            )
            return {
                "prompt_ids": prompt_ids,
                "completion_ids": ids,
                "completion_assistant_mask": mask,
                "label": row["label"],
            }

        tokenized = dataset.map(tokenize, remove_columns=dataset.column_names, desc=f"tokenize kto {dataset_name}")
        tokenized = _drop_long_prompts(tokenized, args.max_length)
        if self.calculate_KL:  # TRL's estimate: completions rotated by one within each batch

            def rotate(batch):
                for key in ("completion_ids", "completion_assistant_mask"):
                    batch[f"KL_{key}"] = [batch[key][-1]] + batch[key][:-1]
                return batch

            tokenized = tokenized.map(rotate, batched=True, batch_size=args.per_device_train_batch_size)
        return tokenized

    def _set_signature_columns_if_needed(self):
        super()._set_signature_columns_if_needed()
        self._signature_columns = [
            *self._signature_columns,
            "completion_assistant_mask",
            "KL_completion_assistant_mask",
        ]
