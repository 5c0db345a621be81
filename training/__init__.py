"""Trainers, the default model and checkpoints (uses torch/TRL; the domain library `touchstone` does not import this)."""
