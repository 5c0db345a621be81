"""Dagster assets: one module per stage, each a thin wrapper over `touchstone/`
or `training/`. Domain imports happen inside the asset bodies so that loading
the definitions (UI, CLI, every run worker) stays fast and torch-free."""
