"""Jobs: the shared sources once, then one run per round."""

from __future__ import annotations

import dagster as dg

from touchstone.paths import Asset

# Runs of these jobs write the data root: the instance's run queue runs one at a time
# (tag_concurrency_limits on this key in every instance config the project ships or writes).
WRITER_TAGS = {"touchstone/writer": "data_root"}

sources_job = dg.define_asset_job(
    "sources",
    selection=dg.AssetSelection.groups("sources"),
    description="Seed sources, base model, held-out tasks and the base's evaluation: materialize once before round r000.",
    tags=WRITER_TAGS,
)

round_job = dg.define_asset_job(
    "round",
    selection=dg.AssetSelection.groups("round"),
    description="One round: propose -> solve -> verify -> training data -> checkpoint -> evaluation.",
    tags=WRITER_TAGS,
)

control_job = dg.define_asset_job(
    "control",
    selection=dg.AssetSelection.assets(Asset.CONTROL_EVALUATION),
    description="A round's control arm: the base trained as many steps on round r000's data alone, evaluated "
    "on the held-out tasks and compared with the round (after the round's evaluation).",
    tags=WRITER_TAGS,
)

filter_ablation_job = dg.define_asset_job(
    "filter_ablation",
    selection=dg.AssetSelection.assets(Asset.ABLATION_ROUND),
    description="One arm and round of the filter ablation (docs/EXPERIMENTS.md; materialize ablation_setup first).",
)

credit_study_job = dg.define_asset_job(
    "credit_study",
    selection=dg.AssetSelection.assets(Asset.CREDIT_STUDY_ARM),
    description="One arm (partition) of the credit-assignment study, every seed (docs/EXPERIMENTS.md; "
    "credit_study_data first).",
)
