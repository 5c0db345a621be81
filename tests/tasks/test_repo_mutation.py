"""`propose mutation --repo` on a src/-layout project whose code imports a
third-party package: the suite runs in the project's environment, a per-test
profile run learns which functions the tests call, and only those are mutated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from touchstone.envs import EnvSpec, build_env
from touchstone.taskmaking.coverage import covered_functions
from touchstone.taskmaking.proposers.mutation import propose_mutation
from touchstone.tasks.isolation import recorded_isolation
from touchstone.tasks.schema import load_task_set
from touchstone.tasks.seeding import resolve_seed
from touchstone.taskmaking.validate import ValidationConfig

SHAPES = """\
import attrs


@attrs.define
class Box:
    width: int
    height: int

    def area(self):
        if self.width < 0 or self.height < 0:
            raise ValueError("negative side")
        return self.width * self.height


def perimeter(box):
    return 2 * (box.width + box.height)


def never_tested(box):
    return box.width - box.height
"""
TESTS = """\
import pytest

from shapes import Box, perimeter


@pytest.mark.parametrize("w, h, want", [(2, 3, 6), (0, 5, 0), (4, 4, 16)])
def test_area(w, h, want):
    assert Box(w, h).area() == want


def test_area_negative():
    with pytest.raises(ValueError):
        Box(-1, 2).area()


@pytest.mark.parametrize("w, h, want", [(2, 3, 10), (0, 0, 0), (1, 5, 12)])
def test_perimeter(w, h, want):
    assert perimeter(Box(w, h)) == want
"""
PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "shapes"
version = "0.1"
dependencies = ["attrs"]
"""
ENV = EnvSpec(requirements=["attrs==23.2.0"], setup=["pip install --no-deps -e ."])


@pytest.fixture
def shapes_repo(tmp_path: Path) -> Path:
    root = tmp_path / "shapes-repo"
    (root / "src" / "shapes").mkdir(parents=True)
    (root / "src" / "shapes" / "__init__.py").write_text(SHAPES)
    (root / "tests").mkdir()
    (root / "tests" / "test_shapes.py").write_text(TESTS)
    (root / "scripts").mkdir()
    (root / "scripts" / "test_smoke.py").write_text("def test_smoke():\n    assert False, 'not part of the suite'\n")
    (root / "pyproject.toml").write_text(PYPROJECT)
    return root


def test_coverage_names_the_functions_each_test_calls(shapes_repo: Path, tmp_path: Path) -> None:
    seed = resolve_seed(shapes_repo, tmp_path / "work", ENV).only_tests("tests/")
    assert seed.tests == ("tests/test_shapes.py",) and seed.module_of("src/shapes/__init__.py") == "shapes"
    env = build_env(ENV, seed.root).sandbox_environment()
    covered = covered_functions(seed, environment=env, backend="bwrap")
    funcs = covered["src/shapes/__init__.py"]
    assert {"Box.area", "perimeter"} <= set(funcs) and "never_tested" not in funcs
    assert "tests/test_shapes.py::test_area_negative" in funcs["Box.area"]


def test_repo_with_its_environment_yields_validated_tasks(shapes_repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "tasks"
    result = propose_mutation(
        out,
        seeds=[str(shapes_repo)],
        environment=ENV,
        tests="tests/",
        n=2,
        workers=1,
        cfg=ValidationConfig(backend="bwrap"),
    )
    assert result.seeds[0].usable, result.seeds[0].detail
    assert result.kept >= 1
    for task in load_task_set(out):
        assert task.environment == ENV
        assert task.entry_points[0].module == "shapes"
        assert task.entry_points[0].function in ("Box.area", "perimeter")  # never the uncovered function
        assert not any(t.startswith("scripts/") for t in task.protected)
        meta = json.loads((task.dir / "task.json").read_text())
        assert meta["environment"]["setup"] == ["pip install --no-deps -e ."]
        # the editable install puts src/ on the candidate's path; the judge, whose tree holds only the
        # tests, finds the package there too: the reference passes isolated, so candidates are graded so
        isolation = recorded_isolation(task)
        assert isolation is not None and isolation.status == "isolated", isolation
