"""Which executor runs a round's steps, chosen by TOUCHSTONE_EXECUTOR so the same
code location runs on a laptop, a Docker host and a Kubernetes cluster:

- `in_process` (default): every step in the run's process; a round is a chain of
  steps, so on a laptop this is the fastest (no per-step interpreter start);
- `multiprocess`: one process per step on this machine;
- `docker`: one container per step (image: TOUCHSTONE_STEP_IMAGE), see deploy/docker/;
- `k8s`: one Kubernetes Job per step (namespace: TOUCHSTONE_K8S_NAMESPACE), see deploy/k8s/;
  each step's pod gets the settings of its pool (GPU, sandbox), orchestration/deploy/k8s_jobs.py.
"""

import os
from collections.abc import Sequence

import dagster as dg

EXECUTORS = ("in_process", "multiprocess", "docker", "k8s")


def executor_from_env(assets: Sequence = ()) -> dg.ExecutorDefinition:
    """`assets`: the code location's assets (k8s: pod settings per step from their pools)."""
    kind = os.environ.get("TOUCHSTONE_EXECUTOR", "in_process")
    if kind == "in_process":
        return dg.in_process_executor
    if kind == "multiprocess":
        return dg.multiprocess_executor.configured({"max_concurrent": 2})
    if kind == "docker":
        from dagster_docker import docker_executor

        return docker_executor.configured(
            {
                "image": os.environ.get("TOUCHSTONE_STEP_IMAGE", "touchstone-orchestration:latest"),
                # Forwarded when set (Dagster refuses a listed variable that is unset).
                "env_vars": [
                    v for v in ("DAGSTER_HOME", "TOUCHSTONE_HOME", "TOUCHSTONE_CACHE", "TMPDIR") if v in os.environ
                ],
                "max_concurrent": 8,
                # No container_kwargs: Dagster merges them shallowly over the run launcher's,
                # so volumes here would drop the launcher's (data root, Docker socket).
            }
        )
    if kind == "k8s":
        try:
            from dagster_k8s import k8s_job_executor
        except ModuleNotFoundError:
            raise ValueError(
                "TOUCHSTONE_EXECUTOR=k8s needs the Kubernetes extra: pip install 'touchstone[k8s]'"
            ) from None

        return k8s_job_executor.configured(k8s_executor_config(assets))
    raise ValueError(f"TOUCHSTONE_EXECUTOR={kind!r}: expected one of {', '.join(EXECUTORS)}")


def k8s_executor_config(assets: Sequence = ()) -> dict:
    """Config of the k8s_job_executor (also used to render its Job specs without a cluster)."""
    from orchestration.deploy.k8s_jobs import per_step_k8s_config

    return {
        "job_namespace": os.environ.get("TOUCHSTONE_K8S_NAMESPACE", "touchstone"),
        "max_concurrent": 32,
        "env_vars": [v for v in ("TOUCHSTONE_HOME", "TOUCHSTONE_CACHE") if v in os.environ],
        "per_step_k8s_config": per_step_k8s_config(assets),
    }
