"""The warm start: verified teacher runs of seed tasks that share no source unit
with a held-out task, a trained checkpoint whose manifest names its data, and a
cache hit the second time (real proposer, sandbox, teacher, verifier, trainer)."""

from __future__ import annotations

import json

import polars as pl

from touchstone.checkpoint import checkpoint_hash, read_manifest
from touchstone.taskmaking.index import read_index
from touchstone.taskmaking.proposers.mutation import propose_mutation
from touchstone.tasks.seeding import default_seeds
from touchstone.taskmaking.validate import ValidationConfig
from training.warm_start import TASKS_FILE, WARM_START_ROUND, WarmStartConfig, rows_of, warm_start


def _seeds_and_heldout(tmp_path):
    seeds = [(str(s.root), s.environment) for s in default_seeds(tmp_path / "seeds", ["inflection", "toolz"])]
    heldout = tmp_path / "heldout"
    propose_mutation(heldout, seeds=seeds, n=1, cfg=ValidationConfig(backend="auto"), rng_seed=1_000_000)
    held_units = {r.unit for r in read_index(heldout) if r.status == "kept"}
    assert held_units
    return seeds, heldout, held_units


def test_warm_start_trains_on_verified_runs_of_non_heldout_tasks_and_is_cached(tiny_model, tmp_path):
    seeds, heldout, held_units = _seeds_and_heldout(tmp_path)
    cfg = WarmStartConfig(n_tasks=3, max_steps=2)
    logs: list[str] = []
    kwargs = dict(seeds=seeds, heldout=heldout, trainer_config={"max_length": 1024}, cfg=cfg, backend="auto")
    model, result = warm_start(tiny_model, **kwargs, workers=2, log=logs.append)

    data = rows_of(model)
    tasks = pl.read_parquet(data / TASKS_FILE)
    kept = tasks.filter(pl.col("status") == "kept")
    assert kept.height == result.tasks and not set(kept["unit"]) & held_units
    assert result.runs == result.tasks and result.base_hash == checkpoint_hash(tiny_model)
    sft = pl.read_parquet(data / "sft.parquet")
    assert sft.height == result.rows and set(sft["task_id"]) <= set(kept["id"])
    assert set(sft["round"]) <= {WARM_START_ROUND}  # where a replayed row came from
    assert result.checkpoint_hash == checkpoint_hash(model)
    if result.trained:  # the teacher's accepted runs trained the weights; the manifest says from what
        manifest = read_manifest(model)
        assert manifest.parent_hash == result.base_hash and manifest.metrics["steps"] == 2
        assert result.checkpoint_hash != result.base_hash
    else:
        assert result.rows == 0 and result.checkpoint_hash == result.base_hash

    again, cached = warm_start(tiny_model, **kwargs, workers=2, log=logs.append)
    assert again == model and cached == result and logs[-1].startswith("warm start: cached")


def test_a_miss_says_which_part_of_the_key_changed(tmp_path):
    """Why a demo after `make test` trained its warm start again is in its log, not a guess."""
    from training.warm_start import KEY_FILE, _why_missed

    parts = {"base_weights": "a", "heldout_set": "b", "trainer_config": "c"}
    assert _why_missed(tmp_path, parts) == "nothing cached yet"
    (tmp_path / "k1").mkdir()
    (tmp_path / "k1" / KEY_FILE).write_text(json.dumps({**parts, "heldout_set": "other"}))
    assert _why_missed(tmp_path, parts) == "the newest cached one (k1) differs in: heldout_set"


def test_a_warm_start_on_reference_demonstrations_trains_on_the_verified_fixes_labelled_as_nobody_s_own(
    tiny_model, tmp_path
):
    """What a real base is warm-started on (local-smollm2.yaml): each task made level 1 and its
    reference fix written as one call in the text protocol; the verifier must accept every one
    (a demonstration it rejects would be a wrong answer taught), and no row is the model's."""
    seeds, heldout, held_units = _seeds_and_heldout(tmp_path)
    cfg = WarmStartConfig(n_tasks=2, max_steps=2, demonstrations="reference")
    model, result = warm_start(
        tiny_model, seeds=seeds, heldout=heldout, trainer_config={"max_length": 2048}, cfg=cfg, backend="auto"
    )
    assert result.tasks == 2 and result.accepted == result.runs == 2 and result.trained
    sft = pl.read_parquet(rows_of(model) / "sft.parquet")
    assert set(sft["policy"]) == {"replay:reference-fix"} and not set(sft["task_id"]) & held_units
    first = sft["messages"].to_list()[0]
    assert "Its current source:" in first[1]["content"]  # level 1: the statement shows the function
    assert first[2]["content"].startswith('<tool_call>[{"name": "str_replace"')
    assert read_manifest(model).parent_hash == result.base_hash


def test_a_change_to_the_verifier_s_code_misses_the_cache(tiny_model, tmp_path, monkeypatch):
    """The verifier decides which runs become rows: a fix to it under the same
    VERIFIER_VERSION must not reuse a warm start trained on the old verdicts."""
    from training import warm_start as ws

    source = tmp_path / "judge.py"
    source.write_text("GUARDED = True\n")
    monkeypatch.setattr(ws, "_package_sources", lambda *packages: [source])
    args = (tiny_model, [], None, {}, WarmStartConfig())
    before = ws._key_parts(*args)
    source.write_text("GUARDED = False\n")
    after = ws._key_parts(*args)
    assert {k for k in before if before[k] != after[k]} == {"verifier_code"}
