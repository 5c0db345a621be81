from touchstone.verify.protected import check_protected
from touchstone.harness import TreeDiff, diff_snapshots


def test_protected_paths_and_dropped_new_tests():
    diff = TreeDiff(
        created=[
            "unittest.py",
            "tests/conftest.py",
            "helpers.py",
            "pkg/json.py",
            "tests/test_new.py",
            "tests/random.py",
            "x.pth",
            "link.py",
        ],
        modified=["tests/test_a.py", "solution.py", "pyproject.toml", "pytest.ini"],
        deleted=["tests/test_b.py"],
        kinds={"link.py": "l"},
    )
    pristine = {"tests/test_a.py", "tests/test_b.py", "solution.py", "pyproject.toml", "pytest.ini"}
    res = check_protected(
        diff,
        pristine,
        ["data/*"],
        {"tests"},
        lambda rel: None,
        {"pyproject.toml": b"[tool.pytest.ini_options]\naddopts = '-x'\n"}.get,
    )
    bad = {v.split(":")[0] for v in res.violations}
    assert bad == {
        "unittest.py",
        "tests/conftest.py",
        "tests/random.py",
        "x.pth",
        "link.py",
        "tests/test_a.py",
        "pyproject.toml",
        "pytest.ini",
        "tests/test_b.py",
    }
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
    assert check_protected(diff, {"data/in.txt"}, ["data/*"], set()).violations == [
        "data/in.txt: protected by the task"
    ]


def test_an_agent_made_git_repository_is_dropped_not_a_violation():
    made = ["pkg/.git/HEAD", ".git/HEAD", ".git/objects/ab/cdef", ".git/index"]
    diff = TreeDiff(created=made + ["solution.py"], kinds={r: "f" for r in made + ["solution.py"]})
    res = check_protected(diff, {"tests/test_a.py"}, [], {"tests"})
    assert res.violations == [] and sorted(res.dropped) == sorted(made)


def test_a_shipped_git_repository_stays_protected():
    diff = TreeDiff(
        modified=[".git/index"],
        created=[".git/objects/ab/cdef"],
        kinds={".git/index": "f", ".git/objects/ab/cdef": "f"},
    )
    res = check_protected(diff, {".git/HEAD", ".git/index", "solution.py"}, [], set())
    assert {v.split(":")[0] for v in res.violations} == {".git/index", ".git/objects/ab/cdef"}


def test_a_new_module_shadowing_a_test_helper_is_a_violation():
    diff = TreeDiff(created=["helpers.py", "fixtures/__init__.py", "util.py"], kinds={})
    res = check_protected(
        diff,
        {"tests/test_a.py", "tests/helpers.py"},
        [],
        {"tests"},
        hidden_files={"tests/test_h.py", "tests/fixtures/__init__.py"},
    )
    assert res.violations == [
        "fixtures/__init__.py: shadows the test helper module 'fixtures'",
        "helpers.py: shadows the test helper module 'helpers'",
    ]
