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
