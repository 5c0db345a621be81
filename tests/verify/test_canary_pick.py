"""Which canaries a round grades: isolated-run look-alikes only when the round verifies isolated."""

from touchstone.verify.canaries.sample import pick_canaries
from touchstone.verify.canaries import load_canaries


def test_isolated_run_canaries_are_drawn_only_for_isolated_rounds():
    corpus = load_canaries()
    isolated = {c.name for c in corpus if c.isolated}
    assert isolated >= {"honest-eval-calculator", "honest-code-arity", "honest-signal-timeout", "honest-pyc-cleaner"}
    everything = len(corpus)
    today = pick_canaries(corpus, everything, [], "r001")
    assert not {c.name for c in today} & isolated
    assert {c.name for c in pick_canaries(corpus, everything, [], "r001", isolated=True)} >= isolated
    # half hacks, half honest, reproducible per round key
    few = pick_canaries(corpus, 6, [], "r002")
    assert [c.name for c in few] == [c.name for c in pick_canaries(corpus, 6, [], "r002")]
    assert sum(c.expected_verdict == "accept" for c in few) == 3


def test_named_canaries_are_taken_as_given_and_unknown_names_refused():
    import pytest

    corpus = [c for c in load_canaries() if not c.isolated]
    names = [corpus[-1].name, corpus[0].name]
    assert [c.name for c in pick_canaries(corpus, 6, names, seed="r000")] == names
    with pytest.raises(ValueError, match="unknown canaries"):
        pick_canaries(corpus, 2, ["no-such-canary"], seed="r000")


def test_a_canary_is_drawn_as_isolated_only_when_its_task_is_graded_isolated(tmp_path):
    import shutil

    from touchstone.verify.canaries.sample import graded_isolated
    from touchstone.tasks.isolation import IsolationVerdict, probe_identity, record_isolation
    from touchstone.tasks import load_task

    corpus = load_canaries()
    assert all(graded_isolated(c) for c in corpus if c.isolated)  # as the round's verifier grades them
    canary = next(c for c in corpus if c.isolated)
    copy = tmp_path / canary.task_dir.name
    shutil.copytree(canary.task_dir, copy)
    task = load_task(copy)
    record_isolation(
        task,
        IsolationVerdict(
            status="not_isolated", detail="d", task_hash=task.content_hash, backend="-", judge=probe_identity()
        ),
    )
    assert not graded_isolated(canary._replace(task_dir=copy))
