"""Scale-out deployments: the Docker deployment driven by `touchstone deploy`
(`images.py` builds its images, `stack.py` starts and stops it) and the
Kubernetes instance config and Helm values (`k8s/`, `k8s_jobs.py`)."""
