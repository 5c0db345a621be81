"""The Dagster web UI in a real headless Chromium (Debian's `chromium`, driven
by Playwright) against dagster-webserver on loopback, over the session's two
materialized rounds. Screenshots go to test-artifacts/ui/."""

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

# the shared two-round fixture: its setup counts in the first test's time
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(3600)]
ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts" / "ui"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
STAGES = [
    "proposed_tasks",
    "raw_trajectories",
    "verification_reports",
    "training_data",
    "checkpoint",
    "round_evaluation",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def webserver(rounds):
    port = _free_port()
    log = open(rounds.home / "webserver.log", "w")
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("dagster-webserver")),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-w",
            "workspace.yaml",
        ],
        cwd=ROOT,
        env=rounds.env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(url + "/server_info", timeout=2)
            break
        except OSError:
            assert proc.poll() is None, (rounds.home / "webserver.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "dagster-webserver did not come up in 120 s"
            time.sleep(0.5)
    yield url
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


@pytest.fixture(scope="module")
def page(webserver):
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed: apt-get install chromium (scripts/setup.sh installs it)")
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.set_default_timeout(60_000)
        yield page
        browser.close()


def _open(page, url: str, wait_for: str) -> None:
    page.goto(url)
    page.get_by_text(wait_for, exact=False).first.wait_for()
    # The first-visit newsletter dialog fades in a moment after the page; it
    # would cover the screenshots. Once dismissed it stays away for this browser.
    skip = page.get_by_role("button", name="Skip")
    try:
        skip.wait_for(timeout=3000)
    except PlaywrightTimeout:
        return
    skip.click()


def test_asset_graph_shows_every_stage(page, webserver):
    _open(page, f"{webserver}/locations/touchstone/asset-groups/round", "round_evaluation")
    page.wait_for_timeout(1500)  # let the graph layout settle for the screenshot
    page.screenshot(path=SHOTS / "asset_graph.png")
    _open(page, f"{webserver}/locations/touchstone/asset-groups/round/list", "round_evaluation")
    body = page.inner_text("body")
    assert all(stage in body for stage in STAGES), body[:2000]


def test_round_partitions_are_listed_as_materialized(page, webserver):
    _open(page, f"{webserver}/assets/checkpoint?view=partitions", "Materialized")
    page.get_by_text("r001").first.wait_for()
    page.screenshot(path=SHOTS / "partitions.png")
    body = page.inner_text("body")
    assert "Materialized (2)" in body and "r000" in body and "r001" in body, body[:2000]


def test_a_blocking_check_result_is_visible(page, webserver):
    _open(page, f"{webserver}/assets/training_data?view=checks", "only_accepted_trajectories")
    page.get_by_text("Passed").first.wait_for()
    page.screenshot(path=SHOTS / "checks.png")
    body = page.inner_text("body")
    assert "This is a blocking asset check" in body and "Passed" in body, body[:2000]


def test_the_evaluation_plot_is_visible(page, webserver):
    _open(page, f"{webserver}/assets/round_evaluation", "pass_at_1")
    page.get_by_text("[Show Markdown]").first.click()  # the report, with the plot inline
    plot = page.locator("img[src^='data:image/png']").first
    plot.wait_for(state="visible")
    assert plot.evaluate("img => img.naturalWidth") > 200
    page.wait_for_timeout(800)  # the dialog fades in; screenshot it settled
    page.screenshot(path=SHOTS / "evaluation_plot.png")
