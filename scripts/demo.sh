#!/usr/bin/env bash
# `make demo`: three rounds end to end on the embedded defaults (teacher in
# round 0, the tiny model after, bwrap or Docker sandbox, local Parquet +
# DuckDB), then where the report and data are and how to open the UI.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
export TOUCHSTONE_HOME="${TOUCHSTONE_HOME:-$PWD/.touchstone}"
export DAGSTER_HOME="${DAGSTER_HOME:-$TOUCHSTONE_HOME/dagster_home}"
ROUNDS="${TOUCHSTONE_DEMO_ROUNDS:-3}"

touchstone sandbox rootfs >/dev/null || { echo "demo: preparing the sandbox root filesystem failed" >&2; exit 1; }

# The demo's sandbox: bubblewrap where it runs (the laptop sandbox; a validation
# here takes about 1.5x as long in Docker, docs/EXPERIMENTS.md), else the default
# (`auto`: Docker). TOUCHSTONE_DEMO_BACKEND=docker|bwrap|auto chooses.
backend="${TOUCHSTONE_DEMO_BACKEND:-}"
if [ -z "$backend" ]; then
  backend=auto
  touchstone sandbox run --backend bwrap --timeout 30 -- true >/dev/null 2>&1 && backend=bwrap
fi
run_config="$TOUCHSTONE_HOME/demo-run.yaml"
mkdir -p "$TOUCHSTONE_HOME"
printf 'resources:\n  sandbox:\n    config:\n      backend: %s\n' "$backend" >"$run_config"

start=$(date +%s)
echo "demo: running $ROUNDS rounds (sandbox: $backend; data: $TOUCHSTONE_HOME, Dagster instance: $DAGSTER_HOME)"
rc=0
touchstone round run --rounds "$ROUNDS" -c "$run_config" || rc=$?
elapsed=$(( $(date +%s) - start ))

echo
if [ $rc -eq 0 ]; then
  echo "demo: $ROUNDS rounds in $((elapsed / 60)) min $((elapsed % 60)) s"
else
  echo "demo: stopped after $((elapsed / 60)) min $((elapsed % 60)) s (reason above); rounds so far:"
  touchstone round list 2>/dev/null || true
fi
# The latest evaluated round's report holds every evaluated round side by side.
reports=("$TOUCHSTONE_HOME"/rounds/*/round_evaluation/report.md)
report="${reports[-1]}"
[ -f "$report" ] && cat "$report"
cat <<MSG

Report:  $report (plot: ${report%report.md}rounds.png)
Data:    $TOUCHSTONE_HOME/rounds/<round>/<asset>/  (Parquet per asset and round)
DuckDB:  touchstone db "SELECT round, count(*) FROM sft GROUP BY ALL"   (file: $TOUCHSTONE_HOME/touchstone.duckdb)
UI:      make ui    (or: DAGSTER_HOME=$DAGSTER_HOME dagster dev -w workspace.yaml), then open http://127.0.0.1:3000
Rerun one asset of one round:
         DAGSTER_HOME=$DAGSTER_HOME dagster asset materialize -m orchestration.definitions --select training_data --partition r000
MSG
exit $rc
