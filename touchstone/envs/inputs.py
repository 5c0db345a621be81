"""What a build sandbox mounts besides the root filesystem, tree and workspace,
and its environment variables: the same for the bubblewrap build
(touchstone/envs/build.py) and the container build (touchstone/envs/docker_build.py)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from pydantic import BaseModel

from touchstone import paths
from touchstone.envs.spec import EnvError

_CA_VARS = ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
_PASS_VARS = ("PIP_INDEX_URL", "PIP_DEFAULT_TIMEOUT", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
              "http_proxy", "https_proxy", "no_proxy")  # fmt: skip


class BuildInputs(BaseModel):
    """What a build sandbox mounts besides the root filesystem, tree and workspace,
    and its environment variables (the same for bwrap and for Docker)."""

    helper: Path  # bin/pip -> python3 -m pip, at /mnt/build
    pip: Path  # the harness's pip package, at /mnt/pylib/pip
    pip_cache: Path  # at /mnt/pip-cache
    ca: Path | None  # a CA bundle for pip, at /mnt/ca.pem
    env: dict[str, str]


def build_inputs(tmp: Path) -> BuildInputs:
    pip_spec = importlib.util.find_spec("pip")
    if pip_spec is None or not pip_spec.submodule_search_locations:
        raise EnvError("building an environment needs pip in the harness's Python (it runs pip in the build sandbox)")
    helper = tmp / "helper"
    (helper / "bin").mkdir(parents=True)
    (helper / "bin" / "pip").write_text('#!/bin/sh\nexec python3 -m pip "$@"\n')
    (helper / "bin" / "pip").chmod(0o755)
    pip_cache = paths.cache() / "pip-cache"
    pip_cache.mkdir(parents=True, exist_ok=True)
    env_vars = {
        "PATH": "/mnt/build/bin:/usr/local/bin:/usr/bin:/bin", "HOME": "/home/agent", "LANG": "C.UTF-8",
        "PYTHONPATH": "/mnt/pylib", "PIP_CACHE_DIR": "/mnt/pip-cache", "PIP_BREAK_SYSTEM_PACKAGES": "1",
        "PIP_IGNORE_INSTALLED": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1",
        "PIP_ROOT_USER_ACTION": "ignore",
    }  # fmt: skip
    ca = next((os.environ[v] for v in _CA_VARS if os.environ.get(v) and Path(os.environ[v]).is_file()), None)
    if ca:
        env_vars["PIP_CERT"] = "/mnt/ca.pem"
    # proxies and an http(s) index reach the build sandbox; a file:// index of the host does not exist there
    env_vars |= {v: os.environ[v] for v in _PASS_VARS if os.environ.get(v) and not os.environ[v].startswith("file:")}
    pip = Path(list(pip_spec.submodule_search_locations)[0])
    return BuildInputs(helper=helper, pip=pip, pip_cache=pip_cache, ca=Path(ca) if ca else None, env=env_vars)
