"""Experiments about the loop itself (docs/EXPERIMENTS.md): the filter ablation.
The top floor of the domain library: it may use everything below it."""
