"""The test harness: the one package that runs a task's hidden tests, below
both `touchstone.tasks` (validation, proposers) and `touchstone.verify`, so a
task is validated exactly as a trajectory is verified (same tree composer,
ini, plugin, result parser, hash seeds, test orders and sandbox backends).

Public API (import from `touchstone.harness`, nothing else):

    suite = HiddenSuite(task, required)       # task: anything with workspace_dir,
                                              # hidden_tests_dir, timeout_s (a Task)
    tree = suite.compose(dest, overlays=[reference_dir], files={rel: data},
                         deleted=[...], patch=None, with_tests=True)
    result = suite.run(tree, i, backend="auto", timeout=None)   # run i of run_plan
    result = run_hidden_tests(task, required=..., overlays=..., files=..., run=0, backend=...)
    run_plan(i) -> (PYTHONHASHSEED, order)    # forward, reverse, shuffle:i ...
    TestRunResult(status pass|fail|error, evidence, passed, failed, total,
                  wall_s, timed_out, collected, collect_errors; .ok, .fraction)

    compose_tree(dest, workspace, overlays=, files=, deleted=, patch=, tests=)
    copy_regular_files, is_cache, diff_snapshots     # trees and their diffs (a WorkspaceDiff)
    apply_patch(dest, patch), PatchError             # git apply, or a loud error
    is_test_file, is_test_module, TEST_DIRS, TEST_MODULE_PATTERNS, test_dirs  # what counts as a test
    harness_mounts(("file.py", "dest_{nonce}.py")), HARNESS_SRC, StreamCapture
                                              # for other runners of sandbox_files/

Modules: `grading` (the pytest command, result channels and their parser),
`suite` (HiddenSuite, run_plan, run_hidden_tests), `tree` (the composer and
snapshot diffs), `testfiles` (the test-file rule), `sandbox_files/` (stdlib-only
files copied read-only into a grading sandbox: the result plugin, the oracle
runner). Guarantees and the threat model: `docs/VERIFIER.md`.
"""

from touchstone.harness.grading import HARNESS_SRC, StreamCapture, TestRunResult, harness_mounts
from touchstone.harness.suite import HiddenSuite, TaskTests, run_hidden_tests, run_plan
from touchstone.harness.testfiles import TEST_DIRS, TEST_MODULE_PATTERNS, is_test_file, is_test_module, test_dirs
from touchstone.harness.tree import PatchError, apply_patch, compose_tree, copy_regular_files, diff_snapshots, is_cache

__all__ = [
    "HARNESS_SRC",
    "TEST_DIRS",
    "TEST_MODULE_PATTERNS",
    "HiddenSuite",
    "PatchError",
    "StreamCapture",
    "TaskTests",
    "TestRunResult",
    "apply_patch",
    "compose_tree",
    "copy_regular_files",
    "diff_snapshots",
    "harness_mounts",
    "is_cache",
    "is_test_file",
    "is_test_module",
    "run_hidden_tests",
    "run_plan",
    "test_dirs",
]
