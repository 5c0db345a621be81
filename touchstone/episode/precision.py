"""Which precision an hf: policy samples in when `Sampling.dtype` is "auto": bfloat16 where this
machine computes it natively, float32 elsewhere. Resolved once, where the `Sampling` is made, so
every trajectory records the precision it was sampled in, never "auto".

Why not bfloat16 everywhere: a CPU without AMX or AVX512-BF16 emulates it and samples slower than
in float32; with them a 2-core Xeon sampled a task's first turns in 0.65x the float32 time
(docs/BENCHMARKS.md, "Sampling precision"). Apple silicon's CPU is left at float32 (unmeasured).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

NATIVE_CPU_FLAGS = ("amx_bf16", "avx512_bf16")  # /proc/cpuinfo flags of CPUs with bfloat16 matmuls


def native_bfloat16(cpuinfo: str | None = None, cuda: bool | None = None) -> bool:
    """A CUDA GPU that supports bfloat16 (the device an hf: policy then samples on), else a CPU
    whose flags name a native bfloat16 unit. `cpuinfo`/`cuda`: this machine's when None."""
    if cuda is None:
        cuda = _cuda_bfloat16()
    if cuda:
        return True
    if cpuinfo is None:
        proc = Path("/proc/cpuinfo")
        cpuinfo = proc.read_text(errors="replace") if sys.platform == "linux" and proc.is_file() else ""
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), [])
    return any(flag in flags for flag in NATIVE_CPU_FLAGS)


def resolve_sampling_dtype(dtype: str) -> str:
    """`dtype` itself, or for "auto" the precision this machine samples best in."""
    if dtype != "auto":
        return dtype
    return "bfloat16" if _this_machine() else "float32"


@functools.cache
def _this_machine() -> bool:
    return native_bfloat16()


def _cuda_bfloat16() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
