"""The Docker deployment on one host: PostgreSQL, the code location, the Dagster
daemon and webserver, each a container on a private network, started, used and
removed by `touchstone deploy up|run|status|down`.

Runs are submitted to the webserver (GraphQL), queued, dequeued by the daemon
and launched by the instance's DockerRunLauncher; their steps run in containers
of their own (docker_executor). Every container the deployment starts, including
the sandboxes its steps start, carries the label `touchstone.deploy=<name>`;
`down` removes exactly those. Layout of ROOT (the same path on the host and in
every container, see docker/dagster.yaml for why):

    ROOT/deploy.json     this deployment's settings and database password (0600)
    ROOT/dagster_home/   dagster.yaml, workspace.yaml, compute logs
    ROOT/data/           TOUCHSTONE_HOME: rounds, DuckDB file
    ROOT/cache/          TOUCHSTONE_CACHE: the default model
    ROOT/tmp/            TMPDIR of runs and steps: sandbox workspaces
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import time
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from orchestration.deploy.images import DOCKER_DIR, Images, build_images

LABEL = "touchstone.deploy"
SERVICE_LABEL = "touchstone.deploy.service"
CANONICAL_ROOT = "/var/lib/touchstone"
LOCATION = "touchstone"
CODE_PORT = 4000
WEB_PORT = 3000
PG_USER = PG_DB = "dagster"
# AWS_* variables of the caller reach every container (object storage roots).
AWS_VARS = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")


class DeployError(RuntimeError):
    pass


@dataclass
class Stack:
    """One deployment: its name (container prefix and label value), root and loopback ports."""

    root: Path
    name: str = "touchstone"
    web_port: int = 3300
    pg_port: int = 5433
    sandbox_slots: int = 4
    pg_password: str = field(default_factory=lambda: secrets.token_urlsafe(18))
    images: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, root: str | os.PathLike) -> Stack:
        path = Path(root).resolve() / "deploy.json"
        if not path.is_file():
            raise DeployError(f"no deployment at {path.parent}: run `touchstone deploy up --root {path.parent}`")
        data = json.loads(path.read_text())
        return cls(**{**data, "root": Path(data["root"])})

    def save(self) -> None:
        path = self.root / "deploy.json"
        path.write_text(json.dumps({**asdict(self), "root": str(self.root)}, indent=2))
        path.chmod(0o600)

    def container(self, service: str) -> str:
        return f"{self.name}-{service}"

    @property
    def network(self) -> str:
        return f"{self.name}-net"

    @property
    def pg_volume(self) -> str:
        return f"{self.name}-pgdata"

    @property
    def dagster_home(self) -> Path:
        return self.root / "dagster_home"

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def env(self) -> dict[str, str]:
        """Environment of every service container; runs and steps inherit it
        through the launcher's env_vars."""
        return {
            "DAGSTER_HOME": str(self.dagster_home),
            "TOUCHSTONE_HOME": str(self.root / "data"),
            "TOUCHSTONE_CACHE": str(self.root / "cache"),
            "TMPDIR": str(self.root / "tmp"),
            "TOUCHSTONE_EXECUTOR": "docker",
            "TOUCHSTONE_STEP_IMAGE": self.images["user_code"],
            "TOUCHSTONE_SANDBOX_LABELS": f"{LABEL}={self.name}",
            "DAGSTER_PG_USERNAME": PG_USER,
            "DAGSTER_PG_PASSWORD": self.pg_password,
            "DAGSTER_PG_HOST": self.container("postgres"),
            "DAGSTER_PG_DB": PG_DB,
            "DAGSTER_PG_PORT": "5432",
            **{k: os.environ[k] for k in AWS_VARS if k in os.environ},
        }


def render_instance_config(stack: Stack) -> dict:
    """docker/dagster.yaml with this deployment's root, network, label and image."""
    config = yaml.safe_load((DOCKER_DIR / "dagster.yaml").read_text())
    launcher = config["run_launcher"]["config"]
    launcher["image"] = stack.images["user_code"]
    launcher["network"] = stack.network
    # Dagster refuses to forward an unset variable: keep the AWS ones only when given.
    launcher["env_vars"] = [v for v in launcher["env_vars"] if v in stack.env()]
    kwargs = launcher["container_kwargs"]
    kwargs["labels"] = {LABEL: stack.name}
    kwargs["volumes"] = [v.replace(CANONICAL_ROOT, str(stack.root)) for v in kwargs["volumes"]]
    return config


def up(stack: Stack, log=print) -> Stack:
    """Build the images if needed, then start (or keep) every service; wait until
    the code location is loaded. Idempotent."""
    import docker

    client = _client()
    for sub in ("dagster_home", "data", "cache", "tmp"):
        (stack.root / sub).mkdir(parents=True, exist_ok=True)
    (stack.root / "tmp").chmod(0o1777)
    images: Images = build_images(log)
    stack.images = {"user_code": images.user_code, "postgres": images.postgres}
    stack.save()
    (stack.dagster_home / "dagster.yaml").write_text(yaml.safe_dump(render_instance_config(stack), sort_keys=False))
    workspace = {
        "load_from": [{"grpc_server": {"host": stack.container("code"), "port": CODE_PORT, "location_name": LOCATION}}]
    }
    (stack.dagster_home / "workspace.yaml").write_text(yaml.safe_dump(workspace))
    try:
        client.networks.get(stack.network)
    except docker.errors.NotFound:
        client.networks.create(stack.network, driver="bridge", labels={LABEL: stack.name})
    _start_postgres(client, stack, log)
    with host_instance(stack) as instance:
        instance.event_log_storage.set_concurrency_slots("gpu", 1)
        instance.event_log_storage.set_concurrency_slots("sandbox", stack.sandbox_slots)
    ws = str(stack.dagster_home / "workspace.yaml")
    _start(
        client,
        stack,
        "code",
        ["dagster", "code-server", "start", "-h", "0.0.0.0", "-p", str(CODE_PORT), "-m", "orchestration.definitions"],
        extra_env={"DAGSTER_CURRENT_IMAGE": stack.images["user_code"]},
        log=log,
    )
    _start(client, stack, "daemon", ["dagster-daemon", "run", "-w", ws], socket=True, log=log)
    _start(
        client,
        stack,
        "webserver",
        ["dagster-webserver", "-h", "0.0.0.0", "-p", str(WEB_PORT), "-w", ws],
        ports={f"{WEB_PORT}/tcp": ("127.0.0.1", stack.web_port)},
        log=log,
    )
    _wait_for_location(stack, log)
    log(f"deployment {stack.name} is up: {stack.web_url}")
    return stack


def _client():
    from touchstone.sandbox.docker import _client

    return _client()


def _start_postgres(client, stack: Stack, log) -> None:
    env = {"POSTGRES_USER": PG_USER, "POSTGRES_PASSWORD": stack.pg_password, "POSTGRES_DB": PG_DB}
    _run_container(
        client,
        stack,
        "postgres",
        stack.images["postgres"],
        None,
        env,
        volumes={stack.pg_volume: {"bind": "/var/lib/postgresql/data", "mode": "rw"}},
        ports={"5432/tcp": ("127.0.0.1", stack.pg_port)},
        log=log,
    )
    import psycopg2

    deadline = time.monotonic() + 120
    while True:
        try:
            psycopg2.connect(
                host="127.0.0.1",
                port=stack.pg_port,
                user=PG_USER,
                password=stack.pg_password,
                dbname=PG_DB,
                connect_timeout=3,
            ).close()
            return
        except psycopg2.OperationalError as exc:
            if time.monotonic() > deadline:
                raise DeployError(
                    f"PostgreSQL did not accept connections on 127.0.0.1:{stack.pg_port}: {exc}"
                    f"\n{_logs(client, stack.container('postgres'))}"
                ) from exc
            time.sleep(1)


def _start(
    client,
    stack: Stack,
    service: str,
    command: list[str],
    *,
    extra_env: Mapping[str, str] = {},
    socket: bool = False,
    ports: Mapping | None = None,
    log,
) -> None:
    volumes = {str(stack.root): {"bind": str(stack.root), "mode": "rw"}}
    if socket:
        volumes["/var/run/docker.sock"] = {"bind": "/var/run/docker.sock", "mode": "rw"}
    _run_container(
        client,
        stack,
        service,
        stack.images["user_code"],
        command,
        {**stack.env(), **extra_env},
        volumes=volumes,
        ports=ports,
        log=log,
    )


def _run_container(client, stack: Stack, service: str, image: str, command, env, *, volumes, ports, log) -> None:
    """Start the service's container unless one runs with the same image; replace a stale one."""
    import docker

    name = stack.container(service)
    try:
        existing = client.containers.get(name)
        if existing.status == "running" and existing.image.tags and image in existing.image.tags:
            return
        existing.remove(force=True)
    except docker.errors.NotFound:
        pass
    log(f"starting {name}")
    client.containers.run(
        image,
        command,
        name=name,
        detach=True,
        environment=env,
        volumes=volumes,
        ports=ports,
        network=stack.network,
        labels={LABEL: stack.name, SERVICE_LABEL: service},
        restart_policy={"Name": "unless-stopped"},
    )


def _logs(client, name: str) -> str:
    try:
        return client.containers.get(name).logs(tail=40).decode(errors="replace")
    except Exception as exc:  # the container may be gone: say so instead of hiding the first error
        return f"(no logs of {name}: {exc})"


def _graphql(stack: Stack, query: str, variables: Mapping | None = None) -> dict:
    import requests

    resp = requests.post(f"{stack.web_url}/graphql", json={"query": query, "variables": variables or {}}, timeout=30)
    try:
        body = resp.json()
    except ValueError:
        body = {}
    if body.get("errors"):
        raise DeployError(f"GraphQL error from {stack.web_url} (HTTP {resp.status_code}): {body['errors']}")
    if body.get("data") is None:
        resp.raise_for_status()
    return body["data"]  # also under HTTP 500: a resolver's exception, as a typed PythonError result


_LOCATIONS = """{ workspaceOrError { __typename ... on Workspace { locationEntries {
  name loadStatus locationOrLoadError { __typename ... on PythonError { message } } } } } }"""


def _wait_for_location(stack: Stack, log, timeout_s: float = 300) -> None:
    import requests

    deadline, last = time.monotonic() + timeout_s, "webserver not answering"
    while time.monotonic() < deadline:
        try:
            entries = _graphql(stack, _LOCATIONS)["workspaceOrError"].get("locationEntries", [])
            entry = next((e for e in entries if e["name"] == LOCATION), None)
            kind = entry and entry["locationOrLoadError"] and entry["locationOrLoadError"]["__typename"]
            if kind == "RepositoryLocation":
                return
            last = f"code location: {entry}"
        except (requests.RequestException, DeployError) as exc:
            last = str(exc)
        time.sleep(2)
    client = _client()
    raise DeployError(
        f"the code location did not load within {timeout_s:.0f} s ({last})\n"
        f"{_logs(client, stack.container('code'))}\n{_logs(client, stack.container('webserver'))}"
    )


@contextmanager
def host_instance(stack: Stack) -> Iterator:
    """The deployment's Dagster instance, opened from this host (PostgreSQL on its
    published loopback port): to register rounds and read results."""
    import dagster as dg

    env = {**stack.env(), "DAGSTER_PG_HOST": "127.0.0.1", "DAGSTER_PG_PORT": str(stack.pg_port)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with dg.DagsterInstance.from_config(str(stack.dagster_home)) as instance:
            yield instance
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def containers(stack: Stack, all_: bool = True) -> list:
    return _client().containers.list(all=all_, filters={"label": f"{LABEL}={stack.name}"})


def prune_run(stack: Stack, run_id: str, timeout_s: float = 120) -> int:
    """Remove the containers of a finished run (its run worker and steps; the step's
    command line names the run), so rounds do not pile up containers. The run
    worker is still exiting when the run is already marked finished: wait for each
    to exit (up to `timeout_s`) instead of skipping it, which left one behind per run."""
    import requests

    removed = 0
    for container in containers(stack):
        if _run_of(container) != run_id:
            continue
        try:
            container.wait(timeout=timeout_s)
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            pass  # still running after the run finished: removed by force
        container.remove(force=True)
        removed += 1
    return removed


def _run_of(container) -> str | None:
    """The run a run container (label) or step container (its ExecuteStepArgs) belongs to."""
    if "dagster/run_id" in container.labels:
        return container.labels["dagster/run_id"]
    command = container.attrs["Config"].get("Cmd") or []
    if "--compressed-input-json" not in command:
        return None
    from dagster._grpc.types import ExecuteStepArgs
    from dagster._serdes import deserialize_value

    packed = command[command.index("--compressed-input-json") + 1]
    return deserialize_value(zlib.decompress(base64.b64decode(packed)).decode(), ExecuteStepArgs).run_id


def down(stack: Stack, volumes: bool = False, log=print) -> list[str]:
    """Remove every container labeled for this deployment (services, runs, steps,
    sandboxes), its network, and with `volumes` its database volume."""
    import docker

    client = _client()
    removed = []
    for _ in range(3):  # a step may start a sandbox while we remove: go again
        found = containers(stack)
        if not found:
            break
        for container in found:
            try:
                container.remove(force=True)
                removed.append(container.name)
            except docker.errors.NotFound:
                pass
    for network in client.networks.list(filters={"label": f"{LABEL}={stack.name}"}):
        network.remove()
    if volumes:
        try:
            client.volumes.get(stack.pg_volume).remove(force=True)
        except docker.errors.NotFound:
            pass
    log(f"removed {len(removed)} containers of deployment {stack.name}")
    return removed
