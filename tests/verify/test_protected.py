from touchstone.verify.protected import check_protected
from touchstone.harness import TreeDiff, diff_snapshots


def test_protected_paths_and_dropped_new_tests():
    diff = TreeDiff(
        created=["unittest.py", "tests/conftest.py", "helpers.py", "pkg/json.py", "tests/test_new.py",
                 "tests/random.py", "x.pth", "link.py"],
        modified=["tests/test_a.py", "solution.py", "pyproject.toml", "pytest.ini"],
        deleted=["tests/test_b.py"],
        kinds={"link.py": "l"},
    )
    pristine = {"tests/test_a.py", "tests/test_b.py", "solution.py", "pyproject.toml", "pytest.ini"}
    res = check_protected(diff, pristine, ["data/*"], {"tests"}, lambda rel: None,
                          {"pyproject.toml": b"[tool.pytest.ini_options]\naddopts = '-x'\n"}.get)
    bad = {v.split(":")[0] for v in res.violations}
    assert bad == {"unittest.py", "tests/conftest.py", "tests/random.py", "x.pth", "link.py",
                   "tests/test_a.py", "pyproject.toml", "pytest.ini", "tests/test_b.py"}
    assert res.dropped == ["tests/test_new.py"]


def test_shared_config_only_protects_its_pytest_section():
    before = {"pyproject.toml": b'[project]\nname = "x"\nversion = "1"\n', "setup.cfg": b"[metadata]\nname = x\n"}
    after = {
        "pyproject.toml": b'[project]\nname = "x"\nversion = "2"\n',  # honest: not test config
        "setup.cfg": b"[metadata]\nname = x\n[tool:pytest]\naddopts = -k visible\n",
        "tox.ini": b"[tox]\nenvlist = py311\n",
    }
    diff = TreeDiff(created=["tox.ini"], modified=["pyproject.toml", "setup.cfg"], kinds={})
    res = check_protected(diff, set(before), [], set(), before.get, after.get)
    assert res.violations == ["setup.cfg: changes the pytest configuration"]


def test_task_globs_and_caches():
    diff = diff_snapshots({"data/in.txt": "a"}, {"data/in.txt": "b", "__pycache__/s.cpython-311.pyc": "c"})
    assert diff.modified == ["data/in.txt"] and not diff.created  # caches never graded
    assert check_protected(diff, {"data/in.txt"}, ["data/*"], set()).violations == ["data/in.txt: protected by the task"]
