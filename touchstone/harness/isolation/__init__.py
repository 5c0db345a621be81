"""Isolated test runs: the hidden tests run in a judge process that holds no
candidate code; the workspace's modules are proxies to the candidate's process
in another sandbox. See docs/VERIFIER.md ("Isolation").

    trees = compose_trees(pristine, files, deleted, hidden, dest)    # judge + candidate trees
    result = run_isolated(trees, test_files, required, prefixes, timeout=..., backend=...)
The per-task probe (does the reference pass isolated? recorded beside the
task) is task-level: `touchstone.tasks.isolation`. Usually reached through
`HiddenSuite.compose_isolated` / `run_isolated`.
"""

from touchstone.harness.isolation.runner import IsolatedTrees, compose_trees, run_isolated

__all__ = ["IsolatedTrees", "compose_trees", "run_isolated"]
