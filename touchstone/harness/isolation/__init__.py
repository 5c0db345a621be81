"""Isolated test runs: the hidden tests run in a judge process that holds no
candidate code; the workspace's modules are proxies to the candidate's process
in another sandbox. See docs/VERIFIER.md ("Isolation").

    trees = compose_trees(pristine, files, deleted, hidden, dest)    # judge + candidate trees
    result = run_isolated(trees, test_files, required, prefixes, timeout=..., backend=...)
    verdict = probe_isolation(task, backend)     # does the reference pass isolated? (recorded)
    recorded_isolation(task) -> IsolationVerdict | None
"""

from touchstone.harness.isolation.probe import IsolationVerdict, probe_isolation, record_isolation, recorded_isolation
from touchstone.harness.isolation.runner import IsolatedTrees, compose_trees, run_isolated

__all__ = ["IsolatedTrees", "IsolationVerdict", "compose_trees", "probe_isolation", "record_isolation",
           "recorded_isolation", "run_isolated"]
