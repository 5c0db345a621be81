from touchstone.verify.protected import check_protected
from touchstone.harness import diff_snapshots
from touchstone.sandbox import WorkspaceDiff

FILE, LINK = "0" * 64, "link:" + "1" * 64  # snapshot values of a regular file and of a symlink


def after(diff: WorkspaceDiff, **special: str) -> dict[str, str]:
    """The snapshot a run ends in: every created/modified path a regular file unless named."""
    return {rel: special.get(rel, FILE) for rel in diff.created + diff.modified}


def test_protected_paths_and_dropped_new_tests():
    diff = WorkspaceDiff(
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
    )
    pristine = {"tests/test_a.py", "tests/test_b.py", "solution.py", "pyproject.toml", "pytest.ini"}
    res = check_protected(
        diff,
        pristine,
        ["data/*"],
        {"tests"},
        lambda rel: None,
        {"pyproject.toml": b"[tool.pytest.ini_options]\naddopts = '-x'\n"}.get,
        final=after(diff) | {"link.py": LINK},
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
    diff = WorkspaceDiff(created=["tox.ini"], modified=["pyproject.toml", "setup.cfg"])
    res = check_protected(diff, set(before), [], set(), before.get, after.get, final=dict.fromkeys(after, FILE))
    assert res.violations == ["setup.cfg: changes the pytest configuration"]


def test_task_globs_and_caches():
    diff = diff_snapshots({"data/in.txt": "a"}, {"data/in.txt": "b", "__pycache__/s.cpython-311.pyc": "c"})
    assert diff.modified == ["data/in.txt"] and not diff.created  # caches never graded
    assert check_protected(diff, {"data/in.txt"}, ["data/*"], set(), final={"data/in.txt": "b"}).violations == [
        "data/in.txt: protected by the task"
    ]


def test_an_agent_made_git_repository_is_dropped_not_a_violation():
    made = ["pkg/.git/HEAD", ".git/HEAD", ".git/objects/ab/cdef", ".git/index"]
    diff = WorkspaceDiff(created=made + ["solution.py"])
    res = check_protected(diff, {"tests/test_a.py"}, [], {"tests"}, final=after(diff))
    assert res.violations == [] and sorted(res.dropped) == sorted(made)


def test_a_shipped_git_repository_stays_protected():
    diff = WorkspaceDiff(modified=[".git/index"], created=[".git/objects/ab/cdef"])
    res = check_protected(diff, {".git/HEAD", ".git/index", "solution.py"}, [], set(), final=after(diff))
    assert {v.split(":")[0] for v in res.violations} == {".git/index", ".git/objects/ab/cdef"}


def test_a_new_module_shadowing_a_test_helper_is_a_violation():
    diff = WorkspaceDiff(created=["helpers.py", "fixtures/__init__.py", "util.py"])
    res = check_protected(
        diff,
        {"tests/test_a.py", "tests/helpers.py"},
        [],
        {"tests"},
        hidden_files={"tests/test_h.py", "tests/fixtures/__init__.py"},
        final=after(diff),
    )
    assert res.violations == [
        "fixtures/__init__.py: shadows the test helper module 'fixtures'",
        "helpers.py: shadows the test helper module 'helpers'",
    ]
