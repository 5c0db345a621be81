"""Seeds held out whole: the held-out tasks' libraries are disjoint from every training source."""

from pathlib import Path

import dagster as dg
import pytest

from assets.sources import seed_sources
from orchestration.resources import StorageResource


def _materialize(home: Path, heldout: list[str]) -> dg.ExecuteInProcessResult:
    config = {"seeds": ["inflection", "toolz", "cachetools"], "heldout": heldout}
    return dg.materialize(
        [seed_sources],
        resources={"storage": StorageResource(root=str(home))},
        run_config={"ops": {"seed_sources": {"config": config}}},
        raise_on_error=False,
    )


def test_a_held_out_seed_feeds_only_the_held_out_tasks(tmp_path):
    assert _materialize(tmp_path, ["cachetools"]).success
    storage = StorageResource(root=str(tmp_path))
    training = [Path(d).name for d, _ in storage.seed_dirs()]
    heldout = [Path(d).name for d, _ in storage.seed_dirs(heldout=True)]
    assert len(training) == 2 and not any("cachetools" in d for d in training)
    assert len(heldout) == 1 and "cachetools" in heldout[0]
    assert storage.seed_dirs(heldout=True)[0][1] is not None  # its environment travels with it


def test_without_a_held_out_seed_both_roles_use_every_seed(tmp_path):
    assert _materialize(tmp_path, []).success
    storage = StorageResource(root=str(tmp_path))
    assert len(storage.seed_dirs()) == len(storage.seed_dirs(heldout=True)) == 3


@pytest.mark.parametrize(
    ("heldout", "named"),
    [(["glom"], "heldout names glom, which are not among the seeds"),
     (["inflection", "toolz", "cachetools"], "every seed is held out")],
)  # fmt: skip
def test_a_held_out_name_that_is_no_seed_or_every_seed_is_refused(tmp_path, heldout, named):
    result = _materialize(tmp_path, heldout)
    assert not result.success
    assert named in str(result.failure_data_for_node("seed_sources").error.message)
