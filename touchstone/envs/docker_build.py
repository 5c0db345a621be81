"""The build sandbox as a container, where bubblewrap is missing: a step
container of the Docker deployment has the Docker socket but neither bubblewrap
nor the root filesystem (docs/DEPLOY.md).

The container runs the sandbox image (the same Debian root filesystem, so the
same environment digest) with the network on, every capability dropped and no
new privileges; it sees the tree at `/usr/local`, the workspace copy, and
copies of the harness's pip and CA bundle under the build's temporary directory.
Every mounted path is below TOUCHSTONE_CACHE, which the Docker daemon must see
at the same path (the deployment mounts its root at the same path everywhere)."""

from __future__ import annotations

import shutil
from pathlib import Path

from touchstone.envs.inputs import build_inputs
from touchstone.envs.spec import EnvError


def _run(
    command: str, volumes: dict[Path, tuple[str, str]], env: dict[str, str], network: bool, timeout: float
) -> tuple[int, bytes]:
    """(exit status, output) of `bash -c command` in a fresh sandbox-image container."""
    import requests

    from touchstone.sandbox.docker import _client, ensure_image, extra_labels

    client = _client()
    container = client.containers.run(
        ensure_image(progress=False),
        ["bash", "-c", command],
        detach=True,
        user="0:0",
        working_dir="/workspace",
        environment=env,
        volumes={str(host): {"bind": target, "mode": mode} for host, (target, mode) in volumes.items()},
        network_mode="bridge" if network else "none",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        labels={"touchstone.envbuild": "1", **extra_labels()},
    )
    try:
        try:
            status = container.wait(timeout=timeout)["StatusCode"]
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            return -1, b""
        return status, container.logs()
    finally:
        container.remove(force=True)


def copy_base_tree(tree: Path) -> None:
    """The image's /usr/local into `tree` (what bwrap copies from the root filesystem)."""
    tree.mkdir(parents=True)
    status, output = _run("cp -a /usr/local/. /mnt/tree/", {tree: ("/mnt/tree", "rw")}, {}, False, 300)
    if status != 0:
        raise EnvError(f"environment build: copying the base /usr/local failed (exit {status}): {output[-1500:]!r}")


def step_runner(tree: Path, ws: Path, tmp: Path):
    """A function (what, command, log, timeout) -> exit status running one build step in a container."""
    inputs = build_inputs(tmp)
    shared = tmp / "pylib"  # host-visible copies: the harness's own paths may be a container's
    shutil.copytree(inputs.pip, shared / "pip", ignore=shutil.ignore_patterns("__pycache__"))
    volumes = {
        tree: ("/usr/local", "rw"),
        ws: ("/workspace", "rw"),
        inputs.helper: ("/mnt/build", "ro"),
        shared: ("/mnt/pylib", "ro"),
        inputs.pip_cache: ("/mnt/pip-cache", "rw"),
    }
    if inputs.ca:
        shutil.copy(inputs.ca, tmp / "ca.pem")
        volumes[tmp / "ca.pem"] = ("/mnt/ca.pem", "ro")

    def run(what: str, command: str, log: Path, timeout: float) -> int:
        status, output = _run(command, volumes, inputs.env, True, timeout)
        if status == -1:
            raise EnvError(f"environment build: {what} did not finish in {timeout:g} s")
        log.write_bytes(output)
        return status

    return run
