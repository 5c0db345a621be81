"""Benchmarks, one script per area (`bench_<area>.py`); `python -m benchmarks.run` runs
them all and writes docs/BENCHMARKS.md."""
