"""Dagster wiring for Touchstone rounds: definitions, partitions, resources,
checks, schedules, sensors and storage. Domain logic lives in `touchstone/`."""
