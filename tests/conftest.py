"""Shared fixtures and markers for the whole suite.

Docker: tests marked `@pytest.mark.docker` (or using the `require_docker` fixture)
skip when no Docker daemon + sandbox image is available, except under
TOUCHSTONE_REQUIRE_DOCKER=1 (CI, `.ci/run`), where they fail instead."""

from __future__ import annotations

import os

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`make test` runs workers; --dist loadgroup) a file's tests
    stay on one worker, so a module-scoped fixture (a deployment, a trained model) is
    built once; files sharing a session fixture name one `xdist_group` to stay together."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


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
