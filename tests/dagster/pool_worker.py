"""A separate process that runs ``index_job`` for one partition (used by the concurrency test).

``python -m tests.dagster.pool_worker KEY HOLD_SECONDS``: the embeddings resource sleeps
``HOLD_SECONDS`` when chroma_collection asks for it, so the step holds its pool slot that long.
"""

from __future__ import annotations

import sys
import time

import dagster as dg

from nl2sql_assets.app.instance import process_tags
from tests.dagster.conftest import HashEmbeddingService, HashEmbeddingsResource
from tests.dagster.helpers import execute


class SlowHashEmbeddingsResource(HashEmbeddingsResource):
    hold_seconds: float = 0.0

    def get_service(self) -> HashEmbeddingService:  # type: ignore[override]
        if self._service is None:
            time.sleep(self.hold_seconds)
        return super().get_service()


def main() -> int:
    key, hold = sys.argv[1], float(sys.argv[2])
    with dg.DagsterInstance.get() as instance:
        result = execute(instance, key, {"datasource": key.split("@")[0], **process_tags()},
                         embeddings=SlowHashEmbeddingsResource(hold_seconds=hold))
        print(result.run_id, "ok" if result.success else "failed", flush=True)
        return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main())
