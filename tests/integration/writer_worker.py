"""A separate process that indexes one datasource into an embedded store (the writer-lock tests).

``python -m tests.integration.writer_worker HOME DATASOURCE HOLD_SECONDS``: the store is the
one ``build_vector_store`` makes for ``NL2SQL_HOME=HOME``; embedding the chunks takes
``HOLD_SECONDS``, inside the refresh, so the worker holds the writer lock that long. Prints the
refresh report as JSON.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

from nl2sql_assets.config import Settings
from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.vector_store import build_vector_store
from tests.chunk_samples import CachingService, shop_snapshot
from tests.fakes import HashEmbedder


class SlowService(CachingService):
    def __init__(self, hold_s: float) -> None:
        super().__init__(HashEmbedder(32))
        self.hold_s = hold_s

    def embed_documents(self, texts: Sequence[str]):  # noqa: ANN201 - the parent's EmbedResult
        time.sleep(self.hold_s)
        return super().embed_documents(texts)


def main() -> int:
    home, datasource, hold = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    store = build_vector_store(Settings.from_env({"NL2SQL_HOME": str(home)}), SlowService(hold))  # type: ignore[arg-type]
    chunks = build_chunks(shop_snapshot(datasource_id=datasource))
    report = store.refresh_schema_chunks(datasource, chunks.schema_version, chunks.chunks, tenant_id=chunks.tenant_id)
    print(report.model_dump_json(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
