"""Containers left by a dead harness are reaped when the next sandbox opens;
several harnesses reaping the same leftovers at once must not fail (Docker
answers the later ones 409 "removal already in progress")."""

from __future__ import annotations

import threading

import pytest

from touchstone.sandbox.docker import _reap_stale_containers, ensure_image

pytestmark = pytest.mark.docker

DEAD_OWNER = "999999999:0"  # no such pid: its owner is gone


def test_concurrent_reapers_remove_leftovers_without_failing(require_docker):
    import docker

    client = docker.from_env()
    tag = ensure_image(progress=False)
    leftovers = [
        client.containers.run(
            tag,
            ["sleep", "300"],
            detach=True,
            network_mode="none",
            labels={"touchstone.sandbox": f"leftover-{i}", "touchstone.owner": DEAD_OWNER},
        )
        for i in range(4)
    ]
    errors: list[BaseException] = []

    def reap() -> None:
        try:
            _reap_stale_containers(docker.from_env())
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=reap) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    remaining = client.api.containers(all=True, filters={"label": f"touchstone.owner={DEAD_OWNER}"})
    assert remaining == [], [c["Id"] for c in leftovers]
