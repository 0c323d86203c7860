"""Trim a dbt manifest to what nl2sql-assets reads, for shipping it with the demo.

``dbt parse`` writes about 500 KB, nearly all of it dbt's own macros; the demo's
``commerce_dbt/target/manifest.json`` keeps the metadata, nodes, sources, metrics and
semantic models (what :mod:`nl2sql_assets.dbt.artifacts` models) and drops the rest.
Regenerate it with ``python -m nl2sql_assets.demo.dbt_manifest PATH`` after ``dbt parse``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

KEPT = ("metadata", "nodes", "sources", "metrics", "semantic_models")


def trim_manifest(path: Path) -> None:
    """Rewrite ``path`` keeping only :data:`KEPT`, with sorted keys so a regenerated file diffs cleanly."""
    data = json.loads(path.read_text(encoding="utf-8"))
    kept = {key: data[key] for key in KEPT if key in data}
    for volatile in ("generated_at", "invocation_id", "invocation_started_at", "user_id", "send_anonymous_usage_stats"):
        kept.get("metadata", {}).pop(volatile, None)
    for node in kept.get("nodes", {}).values():
        node.pop("created_at", None)
        node.pop("root_path", None)
    for section in ("sources", "semantic_models", "metrics"):
        for node in kept.get(section, {}).values():
            node.pop("created_at", None)
    path.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    for name in sys.argv[1:]:
        trim_manifest(Path(name))
