"""Shared fixtures and markers for the whole suite.

Docker: tests marked `@pytest.mark.docker` (or using the `require_docker` fixture)
skip when no Docker daemon + sandbox image is available, except under
TOUCHSTONE_REQUIRE_DOCKER=1 (CI, `.ci/run`), where they fail instead."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest


def docker_required() -> bool:
    return os.environ.get("TOUCHSTONE_REQUIRE_DOCKER") == "1"


def _check_docker() -> None:
    from touchstone.sandbox.docker import docker_unavailable_reason

    reason = docker_unavailable_reason()
    if reason is None:
        return
    if docker_required():
        pytest.fail(f"TOUCHSTONE_REQUIRE_DOCKER=1 but Docker is unavailable: {reason}", pytrace=False)
    pytest.skip(f"Docker unavailable: {reason}")


# Files whose tests share a session-scoped fixture: one scheduling unit under
# pytest-xdist, so the fixture is built once, on one worker.
SHARED_SESSION_FIXTURES = {
    "rounds": ("tests/assets/test_rounds.py", "tests/assets/test_ui.py", "tests/assets/test_env_round.py"),
    "cli_experiment": ("tests/experiments/test_filter_ablation.py", "tests/experiments/test_ablation_job.py"),
}
_UNIT_OF_FILE = {path: name for name, paths in SHARED_SESSION_FIXTURES.items() for path in paths}


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`make test` runs workers (pytest-xdist): a file's tests stay on one worker, so a
    module-scoped fixture (a deployment, a trained model) is built once; the files of
    SHARED_SESSION_FIXTURES go together. (xdist's own `loadgroup` marks do nothing
    under pytest 9.2, whose node ids it can no longer rename.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return _UNIT_OF_FILE.get(path, path)

    return ByFile(config, log)


_DATA_ROOT = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """The suite's own data root, one per process (each xdist worker too), never the
    checkout's `.touchstone` nor a TOUCHSTONE_HOME from the shell: a `make demo` beside
    `make test` holds that root's writer lock (the nightly schedule and the sensor then
    skip their tick), and a user's rounds live there. A test that needs another root sets
    TOUCHSTONE_HOME itself."""
    config.stash[_DATA_ROOT] = os.environ["TOUCHSTONE_HOME"] = tempfile.mkdtemp(prefix="touchstone-test-home-")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(config.stash.get(_DATA_ROOT, ""), ignore_errors=True)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("docker"):
        _check_docker()


@pytest.fixture
def require_docker() -> None:
    """Skip (or, under TOUCHSTONE_REQUIRE_DOCKER=1, fail) unless Docker can run sandboxes."""
    _check_docker()


@pytest.fixture(params=["bwrap", pytest.param("docker", marks=pytest.mark.docker)])
def sandbox_backend(request: pytest.FixtureRequest) -> str:
    """Parametrizes a test over both sandbox backends (the docker case is marked)."""
    return request.param


@pytest.fixture(scope="session")
def sandbox_backends() -> list[str]:
    """The concrete sandbox backends usable on this machine right now."""
    from touchstone.sandbox import available_backends

    return available_backends()
