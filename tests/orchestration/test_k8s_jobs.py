"""Kubernetes without a cluster: the Job every step of the round and sources jobs
would get from dagster-k8s (its executor factory, container-context merging and
Job construction, under the K8sRunLauncher of deploy/k8s/dagster.yaml) renders
and validates against the Kubernetes API models; training asks for a GPU on GPU
nodes, sandbox steps get the pod the bwrap backend needs; the Helm values and the
instance config describe the same deployment."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from orchestration.deploy.k8s_jobs import (
    K8S_DIR,
    POOL_POD_CONFIG,
    validate_job,
)

ROOT = Path(__file__).resolve().parents[2]
SANDBOX_STEPS = {"proposed_tasks", "raw_trajectories", "verification_reports", "round_evaluation", "heldout_tasks"}

_RENDER = """
import json, os
from orchestration.definitions import ASSETS, defs
from orchestration.executors import k8s_executor_config
from orchestration.deploy.k8s_jobs import render_step_jobs, validate_job
out = {}
for job in ("round", "sources"):
    for step in render_step_jobs(defs.resolve_job_def(job), k8s_executor_config(ASSETS), "touchstone:test"):
        out[step.op] = {"pool": step.pool, "manifest": validate_job(step.job)}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def rendered() -> dict:
    """op -> pool and validated manifest, from the code location loaded with TOUCHSTONE_EXECUTOR=k8s."""
    import json

    env = {**os.environ, "TOUCHSTONE_EXECUTOR": "k8s", "TOUCHSTONE_K8S_NAMESPACE": "touchstone"}
    done = subprocess.run(
        [sys.executable, "-c", _RENDER], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _container(manifest: dict) -> dict:
    (container,) = manifest["spec"]["template"]["spec"]["containers"]
    return container


def test_every_step_renders_a_valid_job(rendered):
    assert {"checkpoint", "training_data", "base_model", "seed_sources"} | SANDBOX_STEPS <= set(rendered)
    for op, step in rendered.items():
        manifest = step["manifest"]
        assert manifest["kind"] == "Job" and manifest["metadata"]["labels"]["dagster/op"] == op
        container = _container(manifest)
        assert container["image"] == "registry.example.com/touchstone-orchestration:0.1.0"
        sources = {ref.get("configMapRef", ref.get("secretRef"))["name"] for ref in container["envFrom"]}
        assert sources == {"touchstone-env", "touchstone-postgres", "touchstone-s3"}, op
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["TOUCHSTONE_EXECUTOR"] == "k8s" and env["DAGSTER_RUN_STEP_KEY"] == op


def test_training_gets_a_gpu_on_gpu_nodes_and_sandbox_steps_get_the_sandbox_pod(rendered):
    gpu = rendered["checkpoint"]
    assert gpu["pool"] == "gpu"
    assert _container(gpu["manifest"])["resources"]["limits"]["nvidia.com/gpu"] == "1"
    pod = gpu["manifest"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"touchstone.dev/pool": "gpu"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    for op in SANDBOX_STEPS:
        step = rendered[op]
        assert step["pool"] == "sandbox", op
        container, pod = _container(step["manifest"]), step["manifest"]["spec"]["template"]["spec"]
        assert container["securityContext"]["privileged"] is True, op
        assert "nvidia.com/gpu" not in container["resources"].get("limits", {}), op
        assert pod["nodeSelector"] == {"touchstone.dev/pool": "sandbox"}, op
        assert {"name": "touchstone-cache", "mountPath": "/var/cache/touchstone"} in container["volumeMounts"]
        assert {"name": "touchstone-cache", "persistentVolumeClaim": {"claimName": "touchstone-cache"}} in pod[
            "volumes"
        ]
    others = {op for op, s in rendered.items() if s["pool"] not in POOL_POD_CONFIG}
    assert others and all("securityContext" not in _container(rendered[op]["manifest"]) for op in others)


def test_validation_rejects_what_the_api_server_would(rendered):
    from kubernetes.client import (
        V1Container,
        V1Job,
        V1JobSpec,
        V1ObjectMeta,
        V1PodSpec,
        V1PodTemplateSpec,
        V1ResourceRequirements,
    )

    def job(name="ok-job", quantity="1", labels=None):
        container = V1Container(name="c", image="i", resources=V1ResourceRequirements(limits={"cpu": quantity}))
        return V1Job(
            metadata=V1ObjectMeta(name=name, labels=labels or {}),
            spec=V1JobSpec(template=V1PodTemplateSpec(spec=V1PodSpec(containers=[container]))),
        )

    validate_job(job())
    for bad, what in [
        (job(name="Bad_Name"), "DNS-1123"),
        (job(quantity="lots"), "quantity"),
        (job(labels={"k": "x" * 64}), "label"),
    ]:
        with pytest.raises(ValueError, match=what):
            validate_job(bad)


def test_helm_values_describe_the_same_instance():
    instance = yaml.safe_load((K8S_DIR / "dagster.yaml").read_text())
    values = yaml.safe_load((K8S_DIR / "values.yaml").read_text())
    launcher = instance["run_launcher"]["config"]
    chart_launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    assert values["runLauncher"]["type"] == instance["run_launcher"]["class"]
    assert chart_launcher["jobNamespace"] == launcher["job_namespace"]
    assert [m["name"] for m in chart_launcher["envConfigMaps"]] == launcher["env_config_maps"]
    assert [s["name"] for s in chart_launcher["envSecrets"]] == launcher["env_secrets"]
    assert chart_launcher["envVars"] == launcher["env_vars"]
    (code,) = values["dagster-user-deployments"]["deployments"]
    assert f"{code['image']['repository']}:{code['image']['tag']}" == launcher["job_image"]
    assert code["dagsterApiGrpcArgs"] == ["-m", "orchestration.definitions"]
    pg = values["postgresql"]
    assert not pg["enabled"] and pg["postgresqlScheme"] == instance["storage"]["postgres"]["postgres_db"]["scheme"]
    queue = values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    assert queue["maxConcurrentRuns"] == instance["concurrency"]["runs"]["max_concurrent_runs"]
