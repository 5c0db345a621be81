from touchstone.verify.report import CheckResult, VerificationReport


def _report(*statuses):
    checks = [CheckResult(name=f"c{i}", status=s, evidence=f"e{i}") for i, s in enumerate(statuses)]
    return VerificationReport(trajectory_id="t", task_id="k", task_hash="h", checks=checks)


def test_verdict_is_derived_from_checks():
    assert _report("pass", "skipped").verdict == "accept"
    rejected = _report("pass", "fail", "error")
    assert rejected.verdict == "reject" and rejected.reasons == ["c1: e1"]
    assert _report("pass", "error").verdict == "inconclusive"
    assert _report().verdict == "inconclusive"  # no evidence is not acceptance


def test_verdict_cannot_be_forced_and_survives_json():
    forged = VerificationReport(
        trajectory_id="t",
        task_id="k",
        task_hash="h",
        verdict="accept",
        checks=[CheckResult(name="tests", status="fail", evidence="1/2")],
    )
    assert forged.verdict == "reject"
    again = VerificationReport.model_validate_json(forged.model_dump_json())
    assert again == forged and again.report_id == forged.report_id


def test_the_tables_round_trip_and_hold_every_field(tmp_path):
    """write_reports -> read_reports gives the same reports (None and nested
    fields included), and the three tables carry what their models hold."""
    import json

    import polars as pl

    from touchstone.verify.batch import CHECKS_FILE, FINDINGS_FILE, REPORTS_FILE, read_reports, write_reports
    from touchstone.audit.finding import AuditFinding
    from touchstone.verify.report import ProgressPoint

    full = VerificationReport(
        trajectory_id="t1",
        task_id="k",
        task_hash="h",
        environment_digest="sha256:env",
        checks=[
            CheckResult(name="static_audit", status="fail", evidence="S-EXIT"),
            CheckResult(
                name="oracle",
                status="pass",
                evidence="3 replayed",
                counts={"replayed": 3, "recorded": 4, "unreplayable": 0, "tests_uncovered": 0, "unobserved": 0},
            ),
        ],
        findings=[
            AuditFinding(rule="S-EXIT", severity="reject", path="solution.py", line=3, evidence="os._exit(0)"),
            AuditFinding(rule="A-NETWORK", severity="flag", step=2),
        ],
        progress=[ProgressPoint(turn=1, step=1, tool="bash", passed=1, total=2, fraction=0.5)],
        isolation="not_isolated",
        duration_s=1.25,
    )
    bare = VerificationReport(trajectory_id="t0", task_id="k", task_hash="")
    out = write_reports([full, bare], tmp_path)
    assert read_reports(out) == [bare, full]
    rows = {r["trajectory_id"]: r for r in pl.read_parquet(out / REPORTS_FILE).to_dicts()}
    assert (rows["t1"]["failed_checks"], rows["t1"]["n_findings"], rows["t1"]["guard"]) == (
        ["static_audit"],
        2,
        "oracle",
    )
    assert json.loads(rows["t1"]["progress"])[0]["fraction"] == 0.5
    assert (rows["t0"]["progress"], rows["t0"]["guard"], rows["t0"]["verdict"]) == (None, None, "inconclusive")
    checks = pl.read_parquet(out / CHECKS_FILE).filter(pl.col("name") == "oracle").row(0, named=True)
    assert (
        json.loads(checks["counts"])
        == {"replayed": 3, "recorded": 4, "unreplayable": 0, "tests_uncovered": 0, "unobserved": 0}
        and checks["report_id"] == full.report_id
    )
    findings = pl.read_parquet(out / FINDINGS_FILE).sort("rule").to_dicts()
    assert [(f["rule"], f["step"], f["path"], f["line"]) for f in findings] == [
        ("A-NETWORK", 2, None, None),
        ("S-EXIT", None, "solution.py", 3),
    ]
