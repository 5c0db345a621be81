"""TOUCHSTONE_SANDBOX_LABELS: extra labels on every Docker sandbox container, so a
deployment (`touchstone deploy down`) finds the sandboxes its steps started."""

import pytest

from touchstone.sandbox import SandboxError, open_sandbox
from touchstone.sandbox.docker import extra_labels


@pytest.mark.docker
def test_sandbox_containers_carry_the_configured_labels(tmp_path, monkeypatch):
    monkeypatch.setenv("TOUCHSTONE_SANDBOX_LABELS", "touchstone.deploy=labels-test, team = ml")
    with open_sandbox(tmp_path, backend="docker") as sb:
        labels = sb._container.labels
        assert labels["touchstone.deploy"] == "labels-test" and labels["team"] == "ml"
        assert labels["touchstone.sandbox"] == sb.id  # the sandbox's own labels stay


@pytest.mark.parametrize("spec", ["novalue", "=x", "a=1,,b", "a=1,=2"])
def test_malformed_label_specs_are_named(monkeypatch, spec):
    monkeypatch.setenv("TOUCHSTONE_SANDBOX_LABELS", spec)
    with pytest.raises(SandboxError, match="TOUCHSTONE_SANDBOX_LABELS"):
        extra_labels()


def test_no_labels_when_unset(monkeypatch):
    monkeypatch.delenv("TOUCHSTONE_SANDBOX_LABELS", raising=False)
    assert extra_labels() == {}
    monkeypatch.setenv("TOUCHSTONE_SANDBOX_LABELS", "a=1, b=x=y")
    assert extra_labels() == {"a": "1", "b": "x=y"}
