"""The one definition of a test file, on paths from real projects' layouts."""

import pytest

from touchstone.harness import is_test_file, is_test_module
from touchstone.harness import testfiles


@pytest.mark.parametrize("rel", [
    "tests/test_calc.py", "test_calc.py", "pkg/calc_test.py", "src/pkg/tests/unit/test_n.py",
])  # fmt: skip
def test_test_modules_are_test_files(rel):
    assert is_test_module(rel) and is_test_file(rel)


@pytest.mark.parametrize("rel", [
    "conftest.py", "pkg/conftest.py", "tests/helpers.py", "tests/data/input.json",
    "testing/fixtures.py", "lib/testing/util.py", "test/__init__.py",
])  # fmt: skip
def test_support_files_of_the_tests_are_test_files_but_not_modules(rel):
    assert is_test_file(rel) and not is_test_module(rel)


@pytest.mark.parametrize("rel", [
    "calc.py", "pkg/testing.py", "pkg/contest.py", "latest_results.py", "tests.py", "pkg/test.py",
    "attest/mod.py", "my_tests/mod.py",
])  # fmt: skip
def test_library_code_is_not_a_test_file(rel):
    assert not is_test_file(rel) and not is_test_module(rel)


def test_outermost_test_dirs_keep_only_the_top_test_directory():
    dirs = {"tests", "tests/unit", "src/pkg/testing/sub", "lib", "a/test/b/tests"}
    assert testfiles.outermost_test_dirs(dirs) == ["a/test", "src/pkg/testing", "tests"]


def test_test_dirs_come_from_workspace_tests_and_every_hidden_file():
    found = testfiles.test_dirs(["calc/__init__.py", "tests/test_calc.py", "conftest.py"], ["tests/unit/helpers.py"])
    assert found == {"tests", "tests/unit"}
