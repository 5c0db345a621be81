#!/usr/bin/env bash
# Runs the test suite. With TOUCHSTONE_REQUIRE_DOCKER=1 (CI), tests that
# need Docker fail instead of skipping, so the image is built first.
# The slow and heavy end-to-end tests (`-m slow`, `-m heavy`) are left to CI's
# second phase, to keep a run short; TOUCHSTONE_SLOW=1 runs them too. Arguments go to pytest.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
if docker info >/dev/null 2>&1; then
  touchstone sandbox build-image || { echo "test: building the sandbox image failed" >&2; exit 1; }
fi
touchstone sandbox rootfs >/dev/null || { echo "test: preparing the bwrap root filesystem failed" >&2; exit 1; }
# Lint, format and the layer contracts (pyproject.toml [tool.ruff], [tool.importlinter];
# docs/ARCHITECTURE.md) before any test.
python -m ruff check --quiet . || { echo "test: ruff found problems (see above)" >&2; exit 1; }
python -m ruff format --check --quiet . || { echo "test: files need \`ruff format .\` (listed above)" >&2; exit 1; }
lint-imports --no-cache || { echo "test: an import breaks a layer contract (see above)" >&2; exit 1; }
# `make test` stays under 20 minutes on 2 cores: the slow and heavy end-to-end tests are
# CI's second phase (.ci/run), time-boxed; TOUCHSTONE_SLOW=1 runs them here too.
select=()
if [ $# -eq 0 ] && [ "${TOUCHSTONE_SLOW:-0}" != 1 ]; then
  select=(-m "not slow and not heavy")
  echo "test: slow and heavy end-to-end tests are left to CI's second phase (TOUCHSTONE_SLOW=1 make test runs them here)"
fi
# Workers (pytest-xdist): much of a test's time is waiting on sandboxes, servers and
# containers, so two share even 2 cores well; a file's tests stay on one worker
# (tests/conftest.py). TOUCHSTONE_TEST_WORKERS=0 runs in this process.
workers=${TOUCHSTONE_TEST_WORKERS:-$(python -c 'import os; print(max(2, min(os.cpu_count() or 1, 4)))')}
python -m pytest -q -ra --durations=20 -n "$workers" "${select[@]}" "$@"  # the 20 slowest, in CI output too
rc=$?
if [ $rc -eq 5 ]; then
  echo "test: pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit $rc
