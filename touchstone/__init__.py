"""Touchstone: verified self-improvement rounds for coding agents.

Domain library (no Dagster imports): sandbox, tasks, agent, verify, data.
"""

__version__ = "0.1.0"
