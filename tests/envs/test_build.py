"""Building environments: reuse by digest, clear failures, atomic builds,
and what runs inside them on both backends (network off, same bits)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from touchstone.envs import EnvError, EnvSpec, build_env, cached, digest
from touchstone.envs.build import env_dir
from touchstone.sandbox import WorkspaceDiff
from touchstone.sandbox import open_sandbox
from touchstone.sandbox.image import image_hash
from touchstone.verify.protected import check_protected


def test_same_spec_same_environment_reused(attrs_env):
    again = build_env(EnvSpec(requirements=["attrs==23.2.0", "sortedcontainers==2.4.0"]))
    assert again.reused and again.dir == attrs_env.dir and again.digest == attrs_env.digest
    assert "attrs==23.2.0" in again.manifest.packages
    assert {"attr", "attrs"} <= set(again.manifest.top_level)
    other = digest(EnvSpec(requirements=["attrs==23.1.0", "sortedcontainers==2.4.0"]), image_hash(), None)
    assert other != attrs_env.digest  # a different pin is a different environment


def test_failed_build_names_the_package_and_leaves_nothing(tmp_path):
    spec = EnvSpec(requirements=["attrs==0.0.1"])
    with pytest.raises(EnvError, match=r"pip could not install attrs==0\.0\.1") as err:
        build_env(spec)
    assert "No matching distribution" in str(err.value) or "satisfies the requirement" in str(err.value)
    env_digest = digest(spec, image_hash(), None)
    assert cached(env_digest) is None and not env_dir(env_digest).exists()


def test_failed_setup_command_is_named(tmp_path):
    (tmp_path / "setup.py").write_text("raise SystemExit('broken setup.py')\n")
    with pytest.raises(EnvError, match="setup command 'pip install -e .'"):
        build_env(EnvSpec(setup=["pip install -e ."]), tmp_path)


def test_bad_specs_are_refused():
    with pytest.raises(ValueError, match="Python 3.11 only"):
        EnvSpec(python="3.12")
    with pytest.raises(ValueError, match="package specifier"):
        EnvSpec(requirements=["--index-url=http://evil.invalid/simple"])


def test_killed_build_leaves_nothing_half_built(tmp_path):
    """A build killed mid-way (SIGKILL: no clean-up runs) is never taken for a built environment."""
    spec = EnvSpec(requirements=["attrs==23.2.0"], setup=[f"sleep 60 # {time.time()}"])
    (tmp_path / "marker.txt").write_text("x")
    code = (
        "import sys; from pathlib import Path; from touchstone.envs import EnvSpec, build_env; "
        f"build_env(EnvSpec.model_validate_json({spec.model_dump_json()!r}), Path({str(tmp_path)!r}))"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    env_digest = digest(spec, image_hash(), tmp_path)
    building = env_dir(env_digest).parent
    deadline = time.monotonic() + 120
    while not any(building.glob(f"{env_dir(env_digest).name}.building-*/tree/lib/python3.11/dist-packages/attrs")):
        assert time.monotonic() < deadline and proc.poll() is None, "the build never got going"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert cached(env_digest) is None and not env_dir(env_digest).exists()
    for leftover in building.glob(f"{env_dir(env_digest).name}.building-*"):  # what the next build would sweep
        shutil.rmtree(leftover)


PROBE = """
import attrs, json, socket, sys
try:
    socket.create_connection(("pypi.org", 443), timeout=3); net = "open"
except OSError as exc:
    net = type(exc).__name__
print(json.dumps({"attrs": attrs.__version__, "file": attrs.__file__, "net": net, "exe": sys.executable}))
"""


def test_environment_visible_and_network_off(attrs_env, sandbox_backend, tmp_path):
    (tmp_path / "probe.py").write_text(PROBE)
    with open_sandbox(tmp_path, backend=sandbox_backend, environment=attrs_env.sandbox_environment()) as sb:
        assert sb.environment_digest == attrs_env.digest
        # the harness's clean `env -i ... python3 -s` sees the packages too
        r = sb.exec("env -i PATH=/usr/bin:/bin python3 -s probe.py")
        assert r.exit_code == 0, r.stderr
        assert '"attrs": "23.2.0"' in r.stdout and "/usr/local/lib/python3.11/dist-packages/" in r.stdout
        assert '"net": "open"' not in r.stdout
        # read-only: nothing the candidate runs can change the installed packages
        w = sb.exec("touch /usr/local/lib/python3.11/dist-packages/attrs/x.py; python3 -m pip --version")
        assert w.exit_code != 0 and ("Read-only" in w.stderr or "No module named pip" in w.stderr)
    with open_sandbox(tmp_path, backend=sandbox_backend) as sb:  # base environment: Debian's older attrs
        r = sb.exec("python3 -c 'import attrs; print(attrs.__version__, attrs.__file__)'")
        assert "23.2.0" not in r.stdout and "/usr/lib/python3/dist-packages/" in r.stdout


def test_same_result_on_both_backends(attrs_env, tmp_path, require_docker):
    (tmp_path / "test_a.py").write_text(
        "import attrs\n@attrs.define\nclass P:\n    x: int\n"
        "def test_eq():\n    assert P(1) == P(1)\ndef test_fail():\n    assert attrs.asdict(P(2)) == {'x': 3}\n"
    )
    outputs = {}
    for backend in ("bwrap", "docker"):
        with open_sandbox(tmp_path, backend=backend, environment=attrs_env.sandbox_environment()) as sb:
            r = sb.exec(
                "python3 -m pytest -q -p no:cacheprovider test_a.py 2>&1 | tail -1; "
                "find /usr/local -type f | sort | xargs sha256sum | sha256sum"
            )
            outputs[backend] = (r.stdout.splitlines()[-2].split(" in ")[0], r.stdout.splitlines()[-1])
    assert outputs["bwrap"] == outputs["docker"]
    assert outputs["bwrap"][0] == "1 failed, 1 passed"


@pytest.mark.parametrize(
    "created",
    [
        "attrs/__init__.py",
        "sortedcontainers.py",
        "tests/sortedcontainers.py",
        "sortedcontainers/sortedlist.py",
        "attrs/_make.py",
    ],
)
def test_shadowing_an_installed_package_is_rejected(attrs_env, created):
    diff, final = WorkspaceDiff(created=[created]), {created: "0" * 64}
    installed = attrs_env.sandbox_environment().top_level
    res = check_protected(diff, set(), [], {"tests"}, installed=installed, final=final)
    assert res.violations and "shadows the module" in res.violations[0]
    assert not check_protected(diff, set(), [], {"tests"}, final=final).violations  # base environment: not a shadow


def test_unrelated_new_module_is_not_a_shadow(attrs_env):
    diff = WorkspaceDiff(created=["attrs_helpers.py"])
    installed = attrs_env.sandbox_environment().top_level
    assert not check_protected(
        diff, set(), [], set(), installed=installed, final={"attrs_helpers.py": "0" * 64}
    ).violations


def test_named_specs_resolve_from_the_task_set_then_the_shipped_ones(tmp_path):
    from touchstone.envs import EnvError, resolve

    task_dir = tmp_path / "set" / "group" / "t1"
    task_dir.mkdir(parents=True)
    (tmp_path / "set" / "environments").mkdir()
    (tmp_path / "set" / "environments" / "mine.json").write_text('{"requirements": ["sortedcontainers==2.4.0"]}')
    assert resolve("mine", task_dir).requirements == ["sortedcontainers==2.4.0"]
    assert resolve("attrs-23", task_dir).requirements == ["attrs==23.2.0"]  # shipped in touchstone/envs/specs
    assert resolve(None, task_dir) is None
    with pytest.raises(EnvError, match="'nope' not found"):
        resolve("nope", task_dir)
    with pytest.raises(EnvError, match="must match"):
        resolve("../etc/passwd", task_dir)
    (tmp_path / "set" / "environments" / "bad.json").write_text('{"requirements": ["x"], "pyhton": "3.11"}')
    with pytest.raises(EnvError, match="bad.json: pyhton"):
        resolve("bad", task_dir)


def test_a_built_environment_holds_only_its_tree_and_manifest(tmp_path):
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\nsetup(name='tiny', version='1', py_modules=['tiny'])\n"
    )
    (tmp_path / "tiny.py").write_text("X = 1\n")
    built = build_env(EnvSpec(setup=["pip install --no-deps -e ."]), tmp_path)
    assert sorted(p.name for p in built.dir.iterdir()) == ["env.json", "tree"]
    assert "tiny==1" in built.manifest.packages and "tiny" not in built.manifest.top_level  # the workspace's own


@pytest.mark.docker
def test_without_bubblewrap_the_build_runs_in_a_container_and_gives_the_same_environment(
    attrs_env, tmp_path, monkeypatch, require_docker
):
    """A step container of the Docker deployment has no bubblewrap and no root
    filesystem, only the Docker socket: the same spec builds there in a container of
    the sandbox image, to the same digest, packages and files, and runs the same."""
    from touchstone.envs import build
    from tests.envs.conftest import ATTRS

    monkeypatch.setattr(build, "bwrap_available", lambda: False)
    monkeypatch.setenv("TOUCHSTONE_CACHE", str(tmp_path / "cache"))  # nothing cached, no rootfs
    built = build_env(ATTRS)
    assert not built.reused and built.digest == attrs_env.digest and str(tmp_path) in str(built.dir)
    assert built.manifest.packages == attrs_env.manifest.packages
    assert built.manifest.top_level == attrs_env.manifest.top_level

    def files(env) -> set[str]:
        tree = env.dir / build.TREE
        return {str(p.relative_to(tree)) for p in tree.rglob("*") if "__pycache__" not in p.parts}

    assert files(built) == files(attrs_env)
    assert not list((tmp_path / "cache").glob("rootfs*"))
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "test_a.py").write_text(
        "import attrs\ndef test_v():\n    assert attrs.__version__ == '23.2.0'\n"
    )
    with open_sandbox(tmp_path / "ws", backend="docker", environment=built.sandbox_environment()) as sb:
        r = sb.exec("python3 -m pytest -q -p no:cacheprovider test_a.py")
    assert r.exit_code == 0, r.stdout + r.stderr
