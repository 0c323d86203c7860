"""The application layer the CLI uses: in-process Dagster runs (``runner``), the instance
(``instance``) and the lineage audit (``audit``). It imports the code location; the code
location never imports it.
"""
