"""dbt projects as a documentation source: descriptions, declared joins, value domains and metrics.

A datasource names a dbt project's artifacts (``dbt: {manifest: ..., catalog: ...}``,
:mod:`nl2sql_assets.dbt.config`); :mod:`~nl2sql_assets.dbt.artifacts` reads them,
:mod:`~nl2sql_assets.dbt.extract` keeps what a retriever can use, and
:mod:`~nl2sql_assets.dbt.apply` matches it to the datasource's tables. This module imports
nothing, so the configuration can name :class:`~nl2sql_assets.dbt.config.DbtConfig` without a cycle.
"""
