"""The Docker warm pool hands out pre-started, isolated sandboxes."""

from __future__ import annotations

from pathlib import Path

import pytest

from touchstone.sandbox import Limits, SandboxError, WarmPool, read_action_log

pytestmark = pytest.mark.docker


def _containers_of(box) -> list:
    return box._docker.api.containers(all=True, filters={"label": f"touchstone.sandbox={box.id}"})


def test_pool_hands_out_fresh_isolated_sandboxes(workspace: Path, tmp_path: Path):
    with WarmPool(size=1, limits=Limits(timeout_s=20)) as pool:
        seen = []
        for n in range(3):
            with pool.open(workspace, action_log=tmp_path / f"log{n}.jsonl") as box:
                r = box.exec(f"cat notes.txt; ls; echo {n} > mine.txt")
                assert r.stdout.startswith("first line\n") and "mine.txt" not in r.stdout
                assert box.diff().created == ["mine.txt"]
                seen.append(box)
            assert _containers_of(box) == []  # removed on close
        assert len({box.id for box in seen}) == 3
        assert [len(read_action_log(tmp_path / f"log{n}.jsonl")) for n in range(3)] == [1, 1, 1]
    with pytest.raises(SandboxError, match="closed"):
        pool.open(workspace)


def test_pool_close_removes_idle_containers():
    pool = WarmPool(size=2)
    first = pool._ready.get()  # wait until one is running
    assert len(_containers_of(first)) == 1
    pool._ready.put(first)
    pool.close()
    assert _containers_of(first) == []


def test_pool_bad_input(tmp_path: Path):
    with pytest.raises(SandboxError, match="at least one"):
        WarmPool(size=0)
    with WarmPool(size=1) as pool, pytest.raises(SandboxError, match="workspace directory does not exist"):
        pool.open(tmp_path / "missing")
