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

    corpus = load_canaries()
    names = [corpus[-1].name, corpus[0].name]
    assert [c.name for c in pick_canaries(corpus, 6, names, seed="r000")] == names
    with pytest.raises(ValueError, match="unknown canaries"):
        pick_canaries(corpus, 2, ["no-such-canary"], seed="r000")
