"""The Docker deployment, for real, driven by `touchstone deploy up|run|status|down`:
`up` builds the images here and starts PostgreSQL, the code location, the daemon
and the webserver; `run` submits one tiny round through the webserver, queued,
launched by the DockerRunLauncher, its steps run in containers (docker_executor)
that start their sandboxes as sibling containers; the round gives the same
assets, checks and lineage as an in-process round (tests/assets/test_rounds.py);
`down` leaves no container and no network. Then a second round, with the deployment's
PostgreSQL restarted under it mid-round: nothing lost or duplicated, a rerun completes it."""

import re
import subprocess
import time
import types

import dagster as dg
import duckdb
import polars as pl
import pytest
import yaml
from click.testing import CliRunner

from cli import main
from orchestration.deploy.stack import LABEL, Stack, containers, host_instance
from orchestration.lineage import latest_metadata
from orchestration.runner import ROUND_STAGES, SOURCE_STAGES
from orchestration.storage import RoundStore
from tests.assets.conftest import tiny_run_config
from tests.faults.test_faults import assert_round_whole
from tests.orchestration.test_one_writer import TOUCHSTONE
from tests.serving import free_port

# The first test also pays for `up` (images built on a fresh machine: 20 min at load 15 here) and the round.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(5400)]

CHECKS = {"canaries_caught", "only_accepted_trajectories", "no_heldout_tasks", "schema_and_rows"}
# `deploy run` prints one line per run: JOB PARTITION STATUS WALLs run=ID
RUN_LINE = re.compile(r"^(?P<job>\w+) (?P<partition>\S+) (?P<status>[A-Z_]+) \d+s run=(?P<run_id>\S+)$", re.M)


def deploy(*args: str) -> str:
    """`touchstone deploy ARGS` as typed; its stdout, or a failure with everything it printed."""
    result = CliRunner().invoke(main, ["deploy", *args])
    assert result.exit_code == 0, (
        f"deploy {args[0]} exited {result.exit_code}:\n{result.output[-6000:]}{result.exception!r}"
    )
    return result.stdout


def run_config_of(root):
    return root.parent / f"{root.name}-run.yaml"


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    root = tmp_path_factory.mktemp("deploy")
    config = run_config_of(root)
    config.write_text(yaml.safe_dump(tiny_run_config()))
    name = f"tstest-{free_port()}"
    ports = ["--web-port", str(free_port()), "--pg-port", str(free_port())]
    try:
        deploy("up", "--root", str(root), "--name", name, *ports, "--sandbox-slots", "2")
        printed = deploy("run", "--root", str(root), "--rounds", "1", "--config", str(config), "--timeout", "3600")
        outcomes = [types.SimpleNamespace(**m.groupdict()) for m in RUN_LINE.finditer(printed)]
        status = deploy("status", "--root", str(root))
        stack = Stack.load(root)
        with host_instance(stack) as instance:
            yield stack, outcomes, instance, status
    finally:
        stack = Stack.load(root) if (root / "deploy.json").is_file() else None
        if stack is not None:
            deploy("down", "--root", str(root), "--volumes")
            assert not containers(stack)
            import docker

            client = docker.from_env()
            assert not client.networks.list(filters={"label": f"{LABEL}={stack.name}"})
            assert not client.volumes.list(filters={"name": stack.pg_volume})
            client.close()


def test_a_round_through_the_deployment_succeeds_with_every_check(deployment):
    _, outcomes, instance, status = deployment
    assert [(o.job, o.status) for o in outcomes] == [("sources", "SUCCESS"), ("round", "SUCCESS")]
    (round_run,) = [o for o in outcomes if o.job == "round"]
    assert round_run.partition == "r000"
    assert re.search(rf"run {round_run.run_id[:8]} round +r000 +SUCCESS", status), status
    for service in ("postgres", "code", "daemon", "webserver"):
        assert re.search(rf"-{service} +running", status), status
    for stage in ROUND_STAGES:
        assert latest_metadata(instance, dg.AssetKey(stage), "r000") is not None, stage
    for stage in SOURCE_STAGES:
        assert latest_metadata(instance, dg.AssetKey(stage)) is not None, stage
    checks = {
        e.dagster_event.event_specific_data.check_name: e.dagster_event.event_specific_data.passed
        for e in instance.all_logs(round_run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    }
    assert checks.pop("promotion_gate"), "the first evaluated round has nothing to lose to"
    assert checks == dict.fromkeys(CHECKS, True)


def test_runs_and_steps_ran_in_containers_and_sandboxes_next_to_them(deployment):
    stack, outcomes, instance, _ = deployment
    for outcome in outcomes:
        run = instance.get_run_by_id(outcome.run_id)
        assert run.tags.get("docker/container_id"), "the run was not launched in a container"
        starting = instance.all_logs(outcome.run_id, of_type=dg.DagsterEventType.STEP_WORKER_STARTING)
        started = instance.all_logs(outcome.run_id, of_type=dg.DagsterEventType.STEP_SUCCESS)
        assert starting and len(starting) == len(started)
        assert all("Docker container" in e.dagster_event.message for e in starting)
    # Finished runs leave no containers behind: only the services remain.
    assert {c.labels.get("touchstone.deploy.service") for c in containers(stack)} == {
        "postgres",
        "code",
        "daemon",
        "webserver",
    }
    store = RoundStore(stack.root / "data")
    trajectories = pl.read_parquet(store.asset_dir("raw_trajectories", "r000") / "trajectories.parquet")
    assert trajectories.height > 0 and set(trajectories["backend"]) == {"docker"}


def test_lineage_and_data_match_an_in_process_round(deployment):
    stack, _, instance, _ = deployment
    base = latest_metadata(instance, dg.AssetKey("base_model"))[0]
    rollout = latest_metadata(instance, dg.AssetKey("raw_trajectories"), "r000")[0]
    checkpoint = latest_metadata(instance, dg.AssetKey("checkpoint"), "r000")[0]
    assert rollout["parent_round"] == "base"
    assert checkpoint["parent_checkpoint_hash"] == base["checkpoint_hash"]
    store = RoundStore(stack.root / "data")
    store.refresh_views()
    con = duckdb.connect(str(store.db_path), read_only=True)
    untraced = con.execute("""
        SELECT s.trajectory_id FROM sft s
        LEFT JOIN trajectories t ON t.trajectory_id = s.trajectory_id AND t.round = s.round
        LEFT JOIN reports r ON r.report_id = s.report_id AND r.round = s.round
        WHERE t.trajectory_id IS NULL OR r.verdict IS DISTINCT FROM 'accept'
    """).fetchall()
    assert untraced == []
    assert con.execute("SELECT count(*) FROM sft WHERE round = 'r000'").fetchone()[0] > 0


def test_postgresql_restarted_under_the_deployment_mid_round_loses_nothing_and_a_rerun_completes(deployment):
    """Issue 37 #7: the deployment's PostgreSQL (run, event and schedule storage of the
    webserver, daemon, run and step containers) stops for longer than Dagster's
    connection retries while round r001's rollouts run, then starts again. `deploy run`
    keeps waiting through the outage; the round either goes on or fails naming the
    cause, and then `deploy run` completes it (the unfinished round first)."""
    stack, _, instance, _ = deployment
    args = ["deploy", "run", "--root", str(stack.root), "--rounds", "1", "--config", str(run_config_of(stack.root))]
    waiting = subprocess.Popen(
        [TOUCHSTONE, *args, "--timeout", "3600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    postgres = next(c for c in containers(stack) if c.labels.get("touchstone.deploy.service") == "postgres")
    try:
        deadline = time.monotonic() + 1800
        while latest_metadata(instance, dg.AssetKey("proposed_tasks"), "r001") is None:
            assert waiting.poll() is None and time.monotonic() < deadline, waiting.communicate()
            time.sleep(2)
        time.sleep(5)  # into the rollouts
        postgres.stop(timeout=10)
        time.sleep(30)
        postgres.start()
        out, err = waiting.communicate(timeout=3600)
    finally:
        waiting.kill()
    assert "Traceback" not in err, err
    if waiting.returncode != 0:  # a step could not record an event while the database was away
        assert re.search(r"round r001 FAILURE", out), out + err
        deploy(*args[1:], "--timeout", "3600")
    (last,) = instance.get_runs(dg.RunsFilter(job_name="round", tags={"dagster/partition": "r001"}), limit=1)
    assert last.status == dg.DagsterRunStatus.SUCCESS
    for stage in ROUND_STAGES:
        assert latest_metadata(instance, dg.AssetKey(stage), "r001") is not None, stage
    assert_round_whole(stack.root / "data", "r001")
