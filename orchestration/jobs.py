"""Jobs: the shared sources once, then one run per round."""

from __future__ import annotations

import dagster as dg

sources_job = dg.define_asset_job(
    "sources",
    selection=dg.AssetSelection.groups("sources"),
    description="Seed sources, base model and held-out tasks: materialize once before round r000.",
)

round_job = dg.define_asset_job(
    "round",
    selection=dg.AssetSelection.groups("round"),
    description="One round: propose -> solve -> verify -> training data -> checkpoint -> evaluation.",
)
