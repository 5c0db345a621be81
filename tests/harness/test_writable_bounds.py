"""Issue 34 #3, the harness's side: the one folder a grading sandbox writes to
(results, JUnit report) is a bounded filesystem, not a folder on the host's disk.
(The sandbox itself refuses a writable mount that is not: tests/sandbox/test_bounds.py.)"""

from __future__ import annotations

import os

import pytest

from touchstone.harness import grading
from touchstone.sandbox.workspace import is_bounded


def test_the_grading_output_folder_is_a_bounded_filesystem():
    if os.geteuid() != 0:
        pytest.skip("bounded folders need root")
    with grading.harness_mounts(("pytest_plugin.py", "th_{nonce}.py")) as (_, _, mounts, out, _):
        assert [m.host for m in mounts if not m.read_only] == [out]
        assert is_bounded(out, grading.OUT_DIR_BYTES, grading.OUT_DIR_FILES)
        assert not is_bounded(out.parent, grading.OUT_DIR_BYTES, grading.OUT_DIR_FILES)
    assert not out.exists()  # unmounted and removed
