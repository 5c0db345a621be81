#!/usr/bin/env bash
# One-GPU check of the training path: a bf16 SFT run and an RL (PGTrainer) run
# through training.train (the code the checkpoint step runs), their tokens/s from
# the progress reports, next to a bare PyTorch loop (forward + backward + AdamW,
# bf16 autocast) on the same model and batch shape: the trainer overhead.
#   scripts/gpu_check.sh [BASE]       BASE: a checkpoint dir or a cached model id (default: the tiny model)
#   STEPS=20 scripts/gpu_check.sh     optimizer steps per measurement (default 20)
# Needs CUDA; GPU_CHECK_ALLOW_CPU=1 runs it on the CPU as a smoke test (float32).
# Record the printed table in docs/BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
exec "$PY" - "${1:-}" <<'PYEOF'
import os, sys, tempfile, time
from pathlib import Path

import torch

sys.path.insert(0, os.getcwd())
from tests.data.fixtures import trajectory, write_round
from tests.data.reports import report
from touchstone.data.build import build_datasets
from training.model_init import default_model
from training.model_options import resolve_base
from training.progress import add_reporter
from training.train import train

cuda = torch.cuda.is_available()
if not cuda and os.environ.get("GPU_CHECK_ALLOW_CPU") != "1":
    sys.exit("gpu_check: no CUDA device (GPU_CHECK_ALLOW_CPU=1 for a CPU smoke run)")
steps = int(os.environ.get("STEPS", "20"))
base = resolve_base(sys.argv[1]) if sys.argv[1] else default_model()
bf16 = cuda and torch.cuda.is_bf16_supported()
work = Path(tempfile.mkdtemp(prefix="gpu-check-"))

FIX = [("read_file", {"path": "calc.py"}), ("str_replace", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
       ("bash", {"command": "python -m pytest -q"}), ("submit", {})]
trajs, reps = [], []
for i in range(8):  # per task one accepted and one rejected run: SFT rows and RL advantages
    task, h = f"task-{i}", f"h{i}"
    trajs += [trajectory(f"ok{i}", task, FIX, task_hash=h, token_ids=False),
              trajectory(f"bad{i}", task, FIX[:2] + [("submit", {})], task_hash=h, token_ids=False)]
    reps += [report(f"ok{i}", "accept", {1: 1.0}, task_id=task, task_hash=h),
             report(f"bad{i}", "reject", {1: 0.5}, task_id=task, task_hash=h)]
data = work / "data"
build_datasets(*write_round(work / "round", trajs, reps), data, round_key="gpu")

speeds: dict[str, list[float]] = {}
current = {"name": ""}
add_reporter(lambda f: speeds.setdefault(current["name"], []).append(f["tokens_per_s"]) if "tokens_per_s" in f else None)
config = {"bf16": bf16, "torch_dtype": "bfloat16" if bf16 else "float32", "per_device_train_batch_size": 4,
          "logging_steps": 1, "max_length": 2048}
rows = []
for method in ("sft", "rl"):
    current["name"] = method
    start = time.perf_counter()
    manifest = train(method, data_dir=data, base=base, out=work / method, config=config, max_steps=steps)
    wall = time.perf_counter() - start
    tps = speeds.get(method, [0.0])[1:] or speeds.get(method, [0.0])  # the first step includes warm-up
    rows.append((method, wall, sum(tps) / len(tps), manifest.metrics.get("train_loss", float("nan"))))

# The bare loop: same model, random tokens, batch 4 x 512, bf16 autocast.
from transformers import AutoModelForCausalLM
device = "cuda" if cuda else "cpu"
model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.bfloat16 if bf16 else torch.float32).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
ids = torch.randint(0, model.config.vocab_size, (4, 512), device=device)
tokens = 0
for step in range(steps + 1):
    if step == 1:  # skip warm-up
        if cuda:
            torch.cuda.synchronize()
        t0, tokens = time.perf_counter(), 0
    with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
    tokens += ids.numel()
if cuda:
    torch.cuda.synchronize()
bare = tokens / (time.perf_counter() - t0)

name = torch.cuda.get_device_name() if cuda else "cpu"
print(f"\n## gpu_check: {name}, base {base}, {steps} steps, bf16={bf16}\n")
print("| run | wall s | tokens/s | vs bare loop | final loss |\n| --- | --- | --- | --- | --- |")
for method, wall, tps, loss in rows:
    print(f"| {method} (training.train) | {wall:.1f} | {tps:,.0f} | {tps / bare:.2f}x | {loss:.4f} |")
print(f"| bare PyTorch loop (4x512) | - | {bare:,.0f} | 1.00x | - |")
if cuda:
    print(f"\npeak GPU memory: {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")
PYEOF
