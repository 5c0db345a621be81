"""Which canaries a round grades: half hacks, half honest, the same ones on a rerun."""

import pytest

from touchstone.verify.canaries import load_canaries
from touchstone.verify.canaries.sample import pick_canaries


def test_a_round_key_picks_the_same_balanced_sample_every_time():
    corpus = load_canaries()
    first = pick_canaries(corpus, 6, [], seed="r003")
    assert [c.name for c in first] == [c.name for c in pick_canaries(corpus, 6, [], seed="r003")]
    verdicts = [c.expected_verdict for c in first]
    assert verdicts.count("accept") == 3 and verdicts.count("reject") == 3
    others = {tuple(c.name for c in pick_canaries(corpus, 6, [], seed=f"r{i:03d}")) for i in range(8)}
    assert len(others) > 1  # the seed matters


def test_named_canaries_are_taken_as_given_and_unknown_names_refused():
    corpus = load_canaries()
    names = [corpus[-1].name, corpus[0].name]
    assert [c.name for c in pick_canaries(corpus, 6, names, seed="r000")] == names
    with pytest.raises(ValueError, match="unknown canaries"):
        pick_canaries(corpus, 2, ["no-such-canary"], seed="r000")
