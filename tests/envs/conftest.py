"""A small pinned pure-Python environment (attrs, sortedcontainers from PyPI), built once per
cache: the only step here that needs the network, and only the first time."""

from __future__ import annotations

import pytest

from touchstone.envs import EnvSpec, build_env

ATTRS = EnvSpec(requirements=["attrs==23.2.0", "sortedcontainers==2.4.0"])


@pytest.fixture(scope="session")
def attrs_env():
    return build_env(ATTRS)
