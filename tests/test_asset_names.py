"""Asset names are written once (`touchstone.paths.Asset`): every asset the
Definitions hold is one of them, and each of them is an asset."""

from __future__ import annotations

from orchestration.definitions import defs
from orchestration.runner import ROUND_STAGES, SOURCE_STAGES
from touchstone.paths import Asset


def test_the_definitions_hold_exactly_the_named_assets() -> None:
    names = {v for k, v in vars(Asset).items() if k.isupper()}
    keys = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert keys == names
    experiments = {Asset.ABLATION_SETUP, Asset.ABLATION_ROUND, Asset.CREDIT_STUDY_DATA, Asset.CREDIT_STUDY_ARM}
    controls = {Asset.CONTROL_EVALUATION}  # after a round's evaluation, on request (`--control`)
    assert set(ROUND_STAGES) | set(SOURCE_STAGES) == names - experiments - controls
