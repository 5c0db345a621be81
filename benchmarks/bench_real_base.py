"""The real base model (SmolLM2-135M-Instruct, `touchstone model fetch`) on this machine:
generation tokens/s on an agent prompt (batch 1, 4 and 8), the first turns of a task's attempts
sampled together (one prefill, one batch: what rollouts do) and one at a time, the second turns
of two concurrent episodes sampled together (what rollout workers do) and one at a time,
a task's first turns with the weights in float32 and in bfloat16 (`Sampling.dtype`),
an agent turn through the `hf:` policy as the loop runs it (turn 1 and turn 2, with the KV
caches it reuses and, for comparison, with every prompt prefilled from scratch), and LoRA SFT
seconds per step on rows in its text tool protocol (LoRA on every layer, and on the top 8).

    OMP_NUM_THREADS=1 python -m benchmarks.bench_real_base [--new-tokens 32] [--steps 2]

One torch thread: on a loaded 2-core machine two threads made decoding 10x slower (docs/BENCHMARKS.md).

Rollouts per minute of a round are measured by the expert-iteration runs themselves
(`training.expert_iteration`: `rollouts_per_min`, docs/EXPERIMENTS.md)."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch

from touchstone.agent.loop import SYSTEM_PROMPT
from touchstone.episode.tools import TOOL_SCHEMAS

STATEMENT = (
    "The test `test_calc.py::test_add` fails:\n    assert add(2, 3) == 5\n\nThe bug is in the function `add` in "
    "`calc.py`. Its current source:\n```python\ndef add(a, b):\n    return a - b\n```\n"
    "Fix it with one `str_replace` on that file, then call `submit`."
)
REPLY = (
    '<tool_call>[{"name": "str_replace", "arguments": {"path": "calc.py", "old": "a - b", "new": "a + b"}}]</tool_call>'
)


def generation(model, tokenizer, new_tokens: int) -> list[dict]:
    chat = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": STATEMENT}]
    ids = tokenizer.apply_chat_template(
        chat, tools=TOOL_SCHEMAS, add_generation_prompt=True, return_dict=True, return_tensors="pt"
    )["input_ids"]
    rows = []
    for batch in (1, 4, 8):
        prompt = ids.repeat(batch, 1)
        with torch.no_grad():
            start = time.perf_counter()
            model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new_tokens,
                           min_new_tokens=new_tokens, do_sample=True, temperature=0.7, pad_token_id=2)  # fmt: skip
            wall = time.perf_counter() - start
        rows.append(
            {
                "measure": f"generate, batch {batch}",
                "prompt_tokens": prompt.shape[1],
                "new_tokens": new_tokens * batch,
                "wall_s": round(wall, 1),
                "tokens_per_s": round(new_tokens * batch / wall, 2),
            }
        )
    return rows


def agent_turns(base: Path, new_tokens: int) -> list[dict]:
    """Two turns of one episode through the `hf:` policy (level-1 statement; the observation of
    an edit), timed with the policy's KV reuse and with it defeated (a fresh policy, no caches)."""
    from touchstone.agent.policies import make_policy
    from touchstone.agent.policies.spec import PolicySpec
    from touchstone.episode.trajectory import Sampling

    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": STATEMENT}]
    sampling = Sampling(temperature=0.7, top_p=0.95, max_tokens=new_tokens, seed=0)
    rows = []
    for reuse in (True, False):
        policy = make_policy(PolicySpec("hf", str(base)), sampling)
        if reuse:  # another episode of the run already saw the system message
            policy.episode(1, 2).act(messages, TOOL_SCHEMAS)
        episode = policy.episode(0, 2)
        chat = list(messages)
        for turn in (1, 2):
            if not reuse:
                episode.cache, policy._system_caches = None, {}
            start = time.perf_counter()
            out = episode.act(chat, TOOL_SCHEMAS)
            wall = time.perf_counter() - start
            rows.append({"measure": f"agent turn {turn}, KV reuse {'on' if reuse else 'off'}",
                         "prompt_tokens": out.prompt_tokens, "new_tokens": out.completion_tokens,
                         "wall_s": round(wall, 1)})  # fmt: skip
            chat += [out.message, {"role": "tool", "content": "replaced 1 occurrence in calc.py"}]
    return rows


def first_turns(base: Path, new_tokens: int, attempts: int = 2) -> list[dict]:
    """The first turns of one task's `attempts` attempts through the `hf:` policy: sampled
    together (`group_attempts`: one prefill, one batch; what rollouts do) and one at a time.
    The same seeds, so the same completions: the walls compare like with like."""
    from touchstone.agent.policies import make_policy
    from touchstone.agent.policies.spec import PolicySpec
    from touchstone.episode.trajectory import Sampling

    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": STATEMENT}]
    policy = make_policy(PolicySpec("hf", str(base)), Sampling(temperature=0.7, top_p=0.95, max_tokens=new_tokens))
    policy.episode(99, 1).act([messages[0], {"role": "user", "content": "hi"}], TOOL_SCHEMAS)  # system cache warm
    rows = []
    for group in (attempts, 1):
        policy.group_attempts(group)
        start = time.perf_counter()
        turns = [
            policy.episode(policy.sampling.attempt_seed(i), 2).act(messages, TOOL_SCHEMAS) for i in range(attempts)
        ]
        rows.append({"measure": f"first turns of {attempts} attempts, {'grouped' if group > 1 else 'one at a time'}",
                     "prompt_tokens": turns[0].prompt_tokens, "new_tokens": sum(t.completion_tokens for t in turns),
                     "wall_s": round(time.perf_counter() - start, 1)})  # fmt: skip
    return rows


def later_turns(base: Path, new_tokens: int, episodes: int = 2) -> list[dict]:
    """The second turns of `episodes` episodes acting at once (rollout workers: different
    conversations, each with its first turn's KV cache) through the `hf:` policy: sampled
    together (`group_attempts(1, concurrent)`: each row prefilled on its own cache, one batch)
    and one at a time. The same seeds, so the same completions: the walls compare like with like."""
    from concurrent.futures import ThreadPoolExecutor

    from touchstone.agent.policies import make_policy
    from touchstone.agent.policies.spec import PolicySpec
    from touchstone.episode.trajectory import Sampling

    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": STATEMENT}]
    policy = make_policy(PolicySpec("hf", str(base)), Sampling(temperature=0.7, top_p=0.95, max_tokens=new_tokens))
    rows = []
    for concurrent in (episodes, 1):
        policy.group_attempts(1, concurrent)
        acting = [policy.episode(policy.sampling.attempt_seed(i), 3) for i in range(episodes)]
        chats = []
        for episode in acting:  # first turns, not timed
            first = episode.act(messages, TOOL_SCHEMAS)
            chats.append([*messages, first.message, {"role": "tool", "content": "replaced 1 occurrence in calc.py"}])
        start = time.perf_counter()
        with ThreadPoolExecutor(episodes) as pool:
            turns = list(pool.map(lambda pair: pair[0].act(pair[1], TOOL_SCHEMAS), zip(acting, chats)))
        how = "together" if concurrent > 1 else "one at a time"
        rows.append({"measure": f"second turns of {episodes} concurrent episodes, {how}",
                     "prompt_tokens": max(t.prompt_tokens for t in turns),
                     "new_tokens": sum(t.completion_tokens for t in turns),
                     "wall_s": round(time.perf_counter() - start, 1)})  # fmt: skip
    return rows


def precisions(base: Path, new_tokens: int, reps: int = 5, attempts: int = 2) -> list[dict]:
    """The first turns of a task's `attempts` attempts (grouped, as rollouts sample them: one
    prefill of the whole prompt, system message included, then one batch) with the weights in
    float32 and in bfloat16 (`Sampling.dtype`), in alternation, `reps` times each: the median
    wall per precision, side by side under the same load."""
    import statistics

    from touchstone.agent.policies import make_policy
    from touchstone.agent.policies.spec import PolicySpec
    from touchstone.episode.trajectory import Sampling

    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": STATEMENT}]
    policies = {
        dtype: make_policy(
            PolicySpec("hf", str(base)), Sampling(temperature=0.7, top_p=0.95, max_tokens=new_tokens, dtype=dtype)
        )
        for dtype in ("float32", "bfloat16")
    }
    walls: dict[str, list[float]] = {dtype: [] for dtype in policies}
    tokens: dict[str, int] = {}
    for rep in range(reps + 1):  # the first round warms the kernels up, untimed
        for dtype, policy in policies.items():
            policy._system_caches, policy._first_turns = {}, {}  # every rep prefills the whole prompt
            policy.group_attempts(attempts)
            start = time.perf_counter()
            turns = [
                policy.episode(policy.sampling.attempt_seed(i), 2).act(messages, TOOL_SCHEMAS) for i in range(attempts)
            ]
            if rep:
                walls[dtype].append(time.perf_counter() - start)
            tokens[dtype] = sum(t.completion_tokens for t in turns)
    medians = {dtype: statistics.median(w) for dtype, w in walls.items()}
    return [{"measure": f"first turns of {attempts} attempts, grouped, weights in {dtype}",
             "prompt_tokens": turns[0].prompt_tokens, "new_tokens": tokens[dtype], "reps": reps,
             "wall_s": round(medians[dtype], 2), "vs_float32": round(medians[dtype] / medians["float32"], 2)}
            for dtype in policies]  # fmt: skip


def training_step(base: Path, steps: int, top_layers: int | None = None) -> dict:
    from touchstone.data.schema import SFTRow, write_rows
    from training.expert_iteration import lora_config
    from training.train import train

    chat = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": STATEMENT},
        {"role": "assistant", "content": REPLY},
        {"role": "tool", "content": "replaced 1 occurrence in calc.py"},
        {"role": "assistant", "content": '<tool_call>[{"name": "submit", "arguments": {}}]</tool_call>'},
    ]
    lineage = dict(
        task_hash="h", round="r000", policy=f"hf:{base}", checkpoint_hash=None, verifier_version="v", report_id="r"
    )
    rows = [
        SFTRow(
            trajectory_id=f"t{i}",
            task_id=f"task{i}",
            messages=chat,
            tools=TOOL_SCHEMAS,
            turn_weights=[1.0, 1.0],
            n_turns=2,
            n_tokens=0,
            **lineage,
        )  # fmt: skip
        for i in range(4)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        write_rows(rows, SFTRow, Path(tmp) / "sft.parquet")
        config = lora_config(steps, top_layers or 0) | {"max_length": 1024}
        start = time.perf_counter()
        manifest = train("sft", data_dir=tmp, base=base, out=Path(tmp) / "out", config=config)
        wall = time.perf_counter() - start
    runtime = manifest.metrics.get("train_runtime", wall)
    where = f"top {top_layers} layers" if top_layers else "all layers"
    return {"measure": f"LoRA SFT (r 16, {where}), batch 2 x 783 tokens", "steps": steps, "wall_s": round(wall, 1),
            "s_per_step": round(float(runtime) / steps, 1)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--only", choices=["first-turns", "later-turns", "precision"], help="one measure alone")
    args = parser.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.base_models import fetch_base_model

    base = fetch_base_model()
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base).eval()
    rows = []

    def measured(row: dict) -> None:  # printed as it comes (a long run keeps what it measured)
        rows.append(row | {"load": round(os.getloadavg()[0], 1)})
        print(json.dumps(rows[-1]), flush=True)

    if args.only is None:
        for row in generation(model, tokenizer, args.new_tokens):
            measured(row)
    del model
    if args.only in (None, "first-turns"):
        for row in first_turns(base, args.new_tokens):
            measured(row)
    if args.only in (None, "later-turns"):
        for row in later_turns(base, args.new_tokens):
            measured(row)
    if args.only in (None, "precision"):
        for row in precisions(base, args.new_tokens):
            measured(row)
    if args.only is None:
        for row in agent_turns(base, args.new_tokens):
            measured(row)
        for top_layers in (None, 8):
            measured(training_step(base, args.steps, top_layers))
    notes = [f"base {base.name}; torch threads {torch.get_num_threads()}"]
    print(json.dumps({"bench": "real_base", "results": rows, "notes": notes}))  # the last object: benchmarks.run


if __name__ == "__main__":
    main()
