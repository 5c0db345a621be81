from touchstone.verify.protected import check_protected
from touchstone.verify.tree import TreeDiff, diff_snapshots


def test_protected_paths_and_dropped_new_tests():
    diff = TreeDiff(
        created=["unittest.py", "tests/conftest.py", "helpers.py", "pkg/json.py", "tests/test_new.py",
                 "tests/random.py", "x.pth", "link.py"],
        modified=["tests/test_a.py", "solution.py", "pyproject.toml"],
        deleted=["tests/test_b.py"],
        kinds={"link.py": "l"},
    )
    res = check_protected(diff, {"tests/test_a.py", "tests/test_b.py", "solution.py", "pyproject.toml"},
                          ["data/*"], {"tests"})
    bad = {v.split(":")[0] for v in res.violations}
    assert bad == {"unittest.py", "tests/conftest.py", "tests/random.py", "x.pth", "link.py",
                   "tests/test_a.py", "pyproject.toml", "tests/test_b.py"}
    assert res.dropped == ["tests/test_new.py"]


def test_task_globs_and_caches():
    diff = diff_snapshots({"data/in.txt": "a"}, {"data/in.txt": "b", "__pycache__/s.cpython-311.pyc": "c"})
    assert diff.modified == ["data/in.txt"] and not diff.created  # caches never graded
    assert check_protected(diff, {"data/in.txt"}, ["data/*"], set()).violations == ["data/in.txt: protected by the task"]
