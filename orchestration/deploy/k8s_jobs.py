"""Kubernetes: what each step's pod gets, by pool, and the Job specs dagster-k8s
creates for a run's steps, rendered here without a cluster.

Pools are Dagster's op concurrency (`@asset(pool=...)`); this module maps them to
pod settings the `k8s_job_executor` applies per step (`per_step_k8s_config`):
- `gpu` (training): one `nvidia.com/gpu`, on GPU nodes;
- `sandbox` (proposal, rollouts, verification, evaluation): the bwrap backend
  inside the step's own pod (no Docker daemon in a pod). bwrap needs to create
  namespaces, mounts and cgroups, so the step container is privileged, and the
  pods run on a dedicated, tainted node pool: agent code stays in bwrap (no
  network, own PID/mount/user namespaces, seccomp, cgroup limits); an escape from
  bwrap would reach a sandbox node only. The sandbox root filesystem lives in
  TOUCHSTONE_CACHE on a shared volume, built once (`touchstone sandbox rootfs`).
See docs/DEPLOY.md."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import yaml

K8S_DIR = Path(__file__).resolve().parent / "k8s"
CACHE_MOUNT = "/var/cache/touchstone"

POOL_POD_CONFIG: dict[str, dict] = {
    "gpu": {
        "container_config": {
            "resources": {
                "limits": {"nvidia.com/gpu": "1", "memory": "64Gi"},
                "requests": {"cpu": "8", "memory": "32Gi"},
            }
        },
        "pod_spec_config": {
            "node_selector": {"touchstone.dev/pool": "gpu"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    },
    "sandbox": {
        "container_config": {
            "security_context": {"privileged": True},
            "resources": {"limits": {"memory": "32Gi"}, "requests": {"cpu": "4", "memory": "16Gi"}},
            "env": [{"name": "TOUCHSTONE_CACHE", "value": CACHE_MOUNT}],
            "volume_mounts": [{"name": "touchstone-cache", "mount_path": CACHE_MOUNT}],
        },
        "pod_spec_config": {
            "node_selector": {"touchstone.dev/pool": "sandbox"},
            "tolerations": [{"key": "touchstone.dev/sandbox", "operator": "Exists", "effect": "NoSchedule"}],
            "volumes": [{"name": "touchstone-cache", "persistent_volume_claim": {"claim_name": "touchstone-cache"}}],
        },
    },
}


def per_step_k8s_config(assets: Iterable) -> dict[str, dict]:
    """op name -> pod settings of its pool, for every asset in a pool listed above."""
    config = {}
    for asset in assets:
        if not isinstance(asset, dg.AssetsDefinition):
            continue
        pool = asset.op.pool
        if pool in POOL_POD_CONFIG:
            config[asset.op.name] = POOL_POD_CONFIG[pool]
    return config


@dataclass(frozen=True)
class RenderedStep:
    op: str
    pool: str | None
    job: object  # kubernetes.client.V1Job


def render_step_jobs(
    job_def: dg.JobDefinition,
    executor_config: Mapping,
    image: str | None = None,
    instance_yaml: Path = K8S_DIR / "dagster.yaml",
    run_id: str = "00000000-0000-0000-0000-000000000000",
) -> list[RenderedStep]:
    """The Job each step of `job_def` gets from the k8s_job_executor under the
    K8sRunLauncher of `instance_yaml`. Uses dagster-k8s's own executor factory,
    container-context merging and Job construction; mirrors the few lines of
    K8sStepHandler.launch_step that need a live run (names, labels, env)."""
    from dagster._config import process_config
    from dagster_k8s import K8sRunLauncher, k8s_job_executor
    from dagster_k8s.container_context import K8sContainerContext
    from dagster_k8s.job import (
        UserDefinedDagsterK8sConfig,
        construct_dagster_k8s_job,
        get_k8s_job_name,
        get_user_defined_k8s_config,
    )

    launcher_config = yaml.safe_load(instance_yaml.read_text())["run_launcher"]["config"]
    with tempfile.TemporaryDirectory() as tmp:
        # dagster-k8s loads a kube config when its launcher and step handler are made;
        # this one names a cluster that is never contacted.
        kubeconfig = Path(tmp) / "kubeconfig"
        kubeconfig.write_text(_RENDER_KUBECONFIG)
        offline = {"load_incluster_config": False, "kubeconfig_file": str(kubeconfig)}
        launcher = K8sRunLauncher(
            inst_data=None, **_processed(process_config, K8sRunLauncher.config_type(), {**launcher_config, **offline})
        )
        handler = _k8s_step_handler(
            k8s_job_executor,
            launcher,
            _processed(process_config, k8s_job_executor.config_schema.config_type, {**executor_config, **offline}),
        )
    run = dg.DagsterRun(job_name=job_def.name, run_id=run_id)
    rendered = []
    for node in job_def.graph.node_dict.values():
        op = node.definition
        step_key = node.name
        context = K8sContainerContext.create_for_run(run, launcher, include_run_tags=False)
        context = context.merge(handler._executor_container_context)
        context = context.merge(K8sContainerContext(run_k8s_config=get_user_defined_k8s_config(op.tags)))
        context = context.merge(
            K8sContainerContext(
                run_k8s_config=UserDefinedDagsterK8sConfig.from_dict(handler._per_step_k8s_config.get(op.name, {}))
            )
        )
        job_config = context.get_k8s_job_config(handler._executor_image, launcher)
        if not job_config.job_image:  # then the code location's image, as in launch_step
            job_config = job_config.with_image(image)
        name = f"dagster-step-{get_k8s_job_name(run_id, step_key)}"
        job = construct_dagster_k8s_job(
            job_config=job_config,
            args=["dagster", "api", "execute_step"],
            job_name=name,
            pod_name=name,
            component="step_worker",
            user_defined_k8s_config=context.run_k8s_config,
            labels={"dagster/job": job_def.name, "dagster/op": step_key, "dagster/run-id": run_id},
            env_vars=[
                {"name": "DAGSTER_RUN_JOB_NAME", "value": job_def.name},
                {"name": "DAGSTER_RUN_STEP_KEY", "value": step_key},
            ],
        )
        rendered.append(RenderedStep(op=op.name, pool=op.pool, job=job))
    return rendered


def _processed(process_config, config_type, value: Mapping) -> dict:
    result = process_config(config_type, dict(value))
    if not result.success:
        raise ValueError(f"invalid config: {[e.message for e in result.errors]}")
    return dict(result.value)


def _k8s_step_handler(k8s_job_executor, launcher, executor_config: Mapping):
    """The executor's step handler, made by dagster-k8s's own factory (it reads only
    the instance's run launcher and the executor config from its init context)."""
    init = SimpleNamespace(instance=SimpleNamespace(run_launcher=launcher), executor_config=executor_config)
    return k8s_job_executor.executor_creation_fn(init)._step_handler


_RENDER_KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: render, cluster: {server: "https://kubernetes.invalid"}}]
users: [{name: render, user: {token: render}}]
contexts: [{name: render, context: {cluster: render, user: render}}]
current-context: render
"""

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def validate_job(job) -> dict:
    """The Job as the API server would receive it, re-read through the Kubernetes
    client's models (required fields, types), with names, labels and resource
    quantities checked as the API server checks them. Returns the manifest."""
    import kubernetes
    from kubernetes.utils import parse_quantity

    api = kubernetes.client.ApiClient()
    manifest = api.sanitize_for_serialization(job)
    model = api._ApiClient__deserialize(manifest, "V1Job")  # raises on a missing required field
    if api.sanitize_for_serialization(model) != manifest:
        raise ValueError("the Job does not survive a round trip through the Kubernetes models")
    problems = []
    name = manifest["metadata"]["name"]
    if len(name) > 63 or not _DNS_LABEL.match(name):
        problems.append(f"job name {name!r} is not a DNS-1123 label")
    pod = manifest["spec"]["template"]
    labels = {**manifest["metadata"].get("labels", {}), **pod.get("metadata", {}).get("labels", {})}
    for key, value in labels.items():
        if len(value) > 63 or not _LABEL_VALUE.match(value):
            problems.append(f"label {key}={value!r} is not a valid label value")
    for container in pod["spec"]["containers"]:
        for kind in ("limits", "requests"):
            for resource, quantity in (container.get("resources") or {}).get(kind, {}).items():
                try:
                    parse_quantity(quantity)
                except ValueError:
                    problems.append(f"{container['name']}: {kind}.{resource}={quantity!r} is not a quantity")
        mounts = {m["name"] for m in container.get("volumeMounts", [])}
        missing = mounts - {v["name"] for v in pod["spec"].get("volumes", [])}
        if missing:
            problems.append(f"{container['name']} mounts undeclared volumes {sorted(missing)}")
    if problems:
        raise ValueError("; ".join(problems))
    return manifest
