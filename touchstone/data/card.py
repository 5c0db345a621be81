"""Dataset cards: the README.md with YAML metadata that makes a directory of
Parquet files a Hugging Face dataset (`datasets.load_dataset(DIR, CONFIG)`,
`trl sft --dataset_name DIR --dataset_config sft`), one config per file set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from touchstone import atomic

CARD_FILE = "README.md"


def write_card(
    out: str | Path, configs: dict[str, str | dict[str, str]], body: str, metadata: dict[str, Any] | None = None
) -> Path:
    """Write OUT/README.md: YAML front matter (`configs`: name -> data files,
    a path or a {split: path} mapping; plus `metadata`) and a Markdown body."""
    front = dict(metadata or {})
    front["configs"] = [
        {
            "config_name": name,
            "data_files": files if isinstance(files, str) else [{"split": s, "path": p} for s, p in files.items()],
        }
        for name, files in configs.items()
    ]
    path = Path(out) / CARD_FILE
    atomic.write_text(path, "---\n" + yaml.safe_dump(front, sort_keys=False) + "---\n\n" + body.rstrip() + "\n")
    return path
