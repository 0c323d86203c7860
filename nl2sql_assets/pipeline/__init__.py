"""The indexing pipeline and what its Dagster shell and CLI share, with no Dagster import.

``steps`` (capture, enrich, checked chunks, publish, with every guard), ``index`` (the steps
composed for scripts), ``planning`` (drift results -> runs), ``keys`` (the partition-key
codec), ``names`` (asset, check and tag names) and ``verify`` (the checks' logic).
"""
