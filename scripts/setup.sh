#!/usr/bin/env bash
# Idempotent setup for a fresh Debian/Ubuntu machine: system packages (when root),
# a venv in .venv with a CPU torch, the project in editable mode.
# Used by `make demo`, `make test` and `make bench`.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
TORCH_VERSION=${TORCH_VERSION:-2.13.0}

need_pkgs=()
command -v bwrap >/dev/null 2>&1 || need_pkgs+=(bubblewrap)
command -v debootstrap >/dev/null 2>&1 || need_pkgs+=(debootstrap)
# libfaketime: task validation's shifted-clock runs (LD_PRELOADed inside the sandbox)
ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || need_pkgs+=(libfaketime)
if [ "${TOUCHSTONE_SKIP_DOCKER:-0}" != 1 ]; then
  command -v dockerd >/dev/null 2>&1 || need_pkgs+=(docker.io)
fi
# Headless Chromium for the web UI test (tests/assets/test_ui.py); opt out with TOUCHSTONE_NEED_BROWSER=0.
if [ "${TOUCHSTONE_NEED_BROWSER:-1}" = 1 ]; then
  command -v chromium >/dev/null 2>&1 || need_pkgs+=(chromium)
fi
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing system packages: ${need_pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
  else
    echo "setup: missing system packages: ${need_pkgs[*]}" >&2
    echo "setup: run:  sudo apt-get install -y ${need_pkgs[*]}" >&2
    exit 1
  fi
fi

# Docker daemon: start it in the background when we may and it is not running.
if [ "${TOUCHSTONE_SKIP_DOCKER:-0}" != 1 ] && command -v dockerd >/dev/null 2>&1; then
  if ! docker info >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
      echo "setup: starting dockerd in the background (log: /tmp/touchstone-dockerd.log)"
      nohup dockerd >/tmp/touchstone-dockerd.log 2>&1 &
      for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
      docker info >/dev/null 2>&1 || echo "setup: dockerd did not come up; the docker backend is unavailable" >&2
    else
      echo "setup: the Docker daemon is not running; start it (sudo systemctl start docker) or use --backend bwrap" >&2
    fi
  fi
fi

stamp="$VENV/.touchstone-installed"
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PY" -m venv "$VENV"
fi
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing Python dependencies into $VENV (first time: a few minutes)"
  "$VENV/bin/pip" install -q --upgrade pip
  # CPU torch first, so nothing below pulls a multi-GB CUDA build.
  if ! "$VENV/bin/python" -c "import torch" >/dev/null 2>&1; then
    "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" \
      || "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" --index-url https://download.pytorch.org/whl/cpu
  fi
  # Every extra: the test suite exercises the Kubernetes specs, `transformers serve` and the UI.
  "$VENV/bin/pip" install -q -e ".[test,k8s,serve,ui-test]"
  touch "$stamp"
fi
