"""A policy server per step (touchstone.agent.serving): the real `transformers
serve` on the tiny checkpoint, named by its content hash; refusals for a wrong
external server and a busy port; no server outlives its step or its parent."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

from touchstone.agent.loop import EpisodeLimits, run_episode
from touchstone.agent.policies import make_policy
from touchstone.agent.serving import ServerSpec, ServingError, served_models, serve_checkpoint
from touchstone.episode.trajectory import Sampling

from tests.serving import free_port


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is dead
        return f.read().split(")")[-1].split()[0] != "Z"


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2)
        return True
    except OSError:
        return False


@pytest.mark.slow
def test_transformers_server_serves_the_checkpoint_under_its_hash_and_stops(simple_task):
    from touchstone.checkpoint import checkpoint_hash
    from training.model_init import default_model

    model = default_model()
    expected = checkpoint_hash(model)
    with serve_checkpoint(
        ServerSpec(
            kind="transformers",
            checkpoint=model,
            checkpoint_hash=expected,
            args=["--device", "cpu"],
            startup_timeout_s=300,
        )
    ) as spec:
        url, served = spec.endpoint
        assert served == expected and served_models(url) == [expected]
        port = int(url.split(":")[2].split("/")[0])
        # The user's own server: accepted only under the expected hash.
        with serve_checkpoint(ServerSpec(kind="external", url=url, checkpoint_hash=expected)) as same:
            assert same == spec
        with pytest.raises(ServingError, match="refusing to roll out"):
            with serve_checkpoint(ServerSpec(kind="external", url=url, checkpoint_hash="0" * 64)):
                pass
        # A server already on the port is stale: refused, not reused.
        with pytest.raises(ServingError, match="already in use"):
            with serve_checkpoint(
                ServerSpec(kind="transformers", checkpoint=model, checkpoint_hash=expected, port=port)
            ):
                pass
        policy = make_policy(spec, Sampling(temperature=1.0, max_tokens=12, seed=1))
        traj = run_episode(simple_task, policy, backend="bwrap", limits=EpisodeLimits(max_turns=1))
        assert traj.error is None and traj.checkpoint_hash == expected  # lineage names the served weights
    assert not _answers(f"http://127.0.0.1:{port}/health")


def test_a_server_that_dies_at_start_fails_with_its_log(tmp_path):
    crash = [sys.executable, "-c", "import sys; print('no GPU found'); sys.exit(3)"]
    with pytest.raises(ServingError, match="exited with 3(.|\n)*no GPU found"):
        with serve_checkpoint(
            ServerSpec(kind="vllm", checkpoint=tmp_path, checkpoint_hash="a" * 64, command=crash, log_dir=tmp_path)
        ):
            pass


@pytest.mark.parametrize("kind", ["transformers", "sglang"])
def test_a_busy_port_is_refused_before_anything_starts(tmp_path, kind):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(ServingError, match=f"port {port} .* already in use"):
            with serve_checkpoint(
                ServerSpec(
                    kind=kind,
                    checkpoint=tmp_path,
                    checkpoint_hash="b" * 64,
                    port=port,
                    command=[sys.executable, "-c", "raise SystemExit('started')"],
                )
            ):
                pass


def test_external_without_a_reachable_server_is_refused():
    with pytest.raises(ServingError, match="no model list"):
        with serve_checkpoint(
            ServerSpec(kind="external", url=f"http://127.0.0.1:{free_port()}/v1", checkpoint_hash="c" * 64)
        ):
            pass


def test_a_killed_step_leaves_no_server(tmp_path):
    """SIGKILL the process that started the server (as when a run is killed): the server goes too."""
    hang = [sys.executable, "-c", "import time; time.sleep(600)"]  # never healthy: the step waits
    step = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        from pathlib import Path
        from touchstone.agent.serving import ServerSpec, serve_checkpoint
        with serve_checkpoint(ServerSpec(kind="vllm", checkpoint=Path({str(tmp_path)!r}), checkpoint_hash="d" * 64,
                                         command={hang!r})):
            pass
    """),
        ],
        cwd=os.getcwd(),
    )
    try:
        deadline = time.monotonic() + 30
        while not (children := _children(step.pid)):
            assert time.monotonic() < deadline, "the server never started"
            time.sleep(0.2)
        os.kill(step.pid, signal.SIGKILL)
        step.wait()
        deadline = time.monotonic() + 10
        while any(_alive(c) for c in children):
            assert time.monotonic() < deadline, f"orphan server processes {children}"
            time.sleep(0.2)
    finally:
        step.kill()


def test_a_server_whose_step_died_before_it_could_arm_the_death_signal_does_not_start():
    """The step SIGKILLed between fork and prctl (the killed-step test above hit this under
    load): the child is no longer the step's, so it ends itself instead of serving orphaned."""
    from touchstone.agent.serving import _die_with_parent

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that is no parent of the child, as a dead step's would be
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        preexec_fn=lambda: _die_with_parent(gone.pid),
    )
    try:
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        child.kill()


def _children(pid: int) -> list[int]:
    try:
        found = open(f"/proc/{pid}/task/{pid}/children").read().split()
    except OSError:
        return []
    return [int(c) for c in found]
