"""Optional LLM enrichment: descriptions, synonyms and example questions for a snapshot.

Enrichment never fails indexing. :func:`enrich_schema_snapshot` resolves its own LLM inside
the guard, so a missing API key, an unreachable or hanging endpoint and a failed call all
degrade the same way: the original snapshot comes back with a record saying why. A missing
or unusable LLM logs at INFO; anything unexpected logs at WARNING with a stack trace. The
chat client itself (the ``openai`` SDK, timeouts, retries, circuit breaker) is in
``llm_client``; the names tests and callers used from here are re-exported.

What is sent: table and column names, types, existing descriptions and, for non-PII
columns only, up to three frequent values. Never credentials, never PII values. Enrichment
only fills what the database's owners left blank and adds synonyms; it never overrides a
comment or an annotation, and never adds or renames tables or columns (structure, and so
the fingerprint, is unchanged).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from nl2sql_assets.indexing.llm_client import (
    DEFAULT_CHAT_MODEL,
    ChatClient,
    EnrichmentError,
    LLMSettings,
    LLMUnavailableError,
    OpenAIChatClient,
    build_llm,
)
from nl2sql_assets.schema.models import Column, EnrichmentRecord, SchemaSnapshot, Table

__all__ = [
    "DEFAULT_CHAT_MODEL", "ChatClient", "EnrichmentError", "EnrichmentOutcome", "EnrichmentRecord", "LLMSettings",
    "LLMUnavailableError", "OpenAIChatClient", "build_llm", "enrich_schema_snapshot",
]

log = logging.getLogger(__name__)

MAX_SYNONYMS = 5

SYSTEM_PROMPT = (
    "You document relational database schemas for a text-to-SQL system. Reply with one JSON object "
    'of the form {"datasource": {"description": str, "example_questions": [str]}, "tables": [{"name": str, '
    '"description": str, "columns": [{"name": str, "description": str, "synonyms": [str]}]}]}. '
    "Descriptions are one short sentence in plain business language. Synonyms are words a business "
    "user would say for the column (at most 5). Use only the table and column names given; leave a "
    "description empty where one is given already."
)


class EnrichmentOutcome(BaseModel):
    model_config = ConfigDict(frozen=True)

    snapshot: SchemaSnapshot
    status: Literal["off", "enriched", "unavailable", "failed"]
    reason: str | None = None


def _table_payload(table: Table) -> dict[str, object]:
    columns = []
    for col in table.columns:
        entry: dict[str, object] = {"name": col.name, "type": col.declared_type or col.type_family}
        if col.text:
            entry["description"] = col.text
        if not col.pii and col.stats and col.stats.top_values:
            entry["examples"] = col.stats.top_values[:3]
        columns.append(entry)
    payload: dict[str, object] = {"name": table.qualified_name, "columns": columns}
    if table.text:
        payload["description"] = table.text
    if table.foreign_keys:
        payload["references"] = sorted({fk.ref_table for fk in table.foreign_keys})
    return payload


def _str_list(value: object) -> list[str]:
    if not isinstance(value, list):
        return []
    return [v.strip() for v in value if isinstance(v, str) and v.strip()]


def _blank_filled(current: str | None, proposed: object) -> str | None:
    """The LLM's text where the owners left the description blank; None to keep what is there."""
    if current or not isinstance(proposed, str) or not proposed.strip():
        return None
    return proposed.strip()


def _merge(snapshot: SchemaSnapshot, answers: list[dict[str, object]], model: str) -> SchemaSnapshot:
    by_table: dict[str, dict[str, object]] = {}
    ds_description: str | None = None
    ds_questions: list[str] = []
    for answer in answers:
        for item in answer.get("tables", []) if isinstance(answer.get("tables"), list) else []:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                by_table[item["name"]] = item
        ds = answer.get("datasource")
        if isinstance(ds, dict):
            if isinstance(ds.get("description"), str) and not ds_description:
                ds_description = ds["description"].strip() or None
            ds_questions.extend(_str_list(ds.get("example_questions")))

    tables_described = columns_described = synonyms_added = 0
    tables: list[Table] = []
    for table in snapshot.tables:
        item = by_table.get(table.qualified_name) or by_table.get(table.name)
        if item is None:
            tables.append(table)
            continue
        update: dict[str, object] = {}
        description = _blank_filled(table.text, item.get("description"))
        if description:
            update["description"] = description
            tables_described += 1
        answers_by_col = {c["name"]: c for c in item.get("columns", []) if isinstance(c, dict)
                          and isinstance(c.get("name"), str)} if isinstance(item.get("columns"), list) else {}
        columns: list[Column] = []
        for col in table.columns:
            answer = answers_by_col.get(col.name)
            if answer is None:
                columns.append(col)
                continue
            col_update: dict[str, object] = {}
            text = _blank_filled(col.text, answer.get("description"))
            if text:
                col_update["description"] = text
                columns_described += 1
            known = {s.lower() for s in col.synonyms} | {col.name.lower()}
            extra = [s for s in _str_list(answer.get("synonyms")) if s.lower() not in known]
            extra = extra[: max(0, MAX_SYNONYMS - len(col.synonyms))]
            if extra:
                col_update["synonyms"] = [*col.synonyms, *extra]
                synonyms_added += len(extra)
            columns.append(col.model_copy(update=col_update) if col_update else col)
        update["columns"] = columns
        tables.append(table.model_copy(update=update))

    info = snapshot.datasource
    info_update: dict[str, object] = {}
    if not info.description and ds_description:
        info_update["description"] = ds_description
    if not info.example_questions and ds_questions:
        info_update["example_questions"] = ds_questions[:5]
    if info_update:
        info = info.model_copy(update=info_update)

    enriched = SchemaSnapshot.create(info, tables, snapshot.captured_at, snapshot.warnings)
    if enriched.fingerprint != snapshot.fingerprint:  # pragma: no cover - _merge never touches structure
        raise EnrichmentError("enrichment changed the structure; discarded")
    return enriched.model_copy(update={
        "schema_version": snapshot.schema_version,
        "enrichment": EnrichmentRecord(
            status="enriched", model=model, source_metadata_hash=snapshot.source_metadata_hash,
            tables_described=tables_described, columns_described=columns_described,
            synonyms_added=synonyms_added,
        ),
    })


def _degraded(snapshot: SchemaSnapshot, status: Literal["off", "unavailable", "failed"],
              reason: str | None, model: str | None = None) -> EnrichmentOutcome:
    record = EnrichmentRecord(status=status, model=model, reason=reason,
                              source_metadata_hash=snapshot.source_metadata_hash)
    return EnrichmentOutcome(snapshot=snapshot.model_copy(update={"enrichment": record}),
                             status=status, reason=reason)


def enrich_schema_snapshot(
    snapshot: SchemaSnapshot,
    llm_factory: Callable[[], ChatClient | None] | None,
    *,
    tables_per_call: int = 8,
) -> EnrichmentOutcome:
    """Enrich a snapshot; never raises.

    Args:
        snapshot: the snapshot as read from the database.
        llm_factory: builds the LLM (None, or a factory returning None, means enrichment is off).
            Called inside the guard so configuration errors degrade like call failures.
        tables_per_call: tables per chat completion, to bound prompt size.

    Returns:
        The enriched snapshot (same fingerprint, new metadata hash) or the original one,
        with an ``EnrichmentRecord`` saying what happened.
    """
    if llm_factory is None:
        return _degraded(snapshot, "off", None)
    model: str | None = None
    try:
        llm = llm_factory()
        if llm is None:
            return _degraded(snapshot, "off", None)
        model = llm.model
        answers = []
        tables = snapshot.tables
        for start in range(0, len(tables), max(1, tables_per_call)):
            batch = tables[start:start + tables_per_call]
            user = json.dumps({
                "datasource": {"id": snapshot.datasource_id, "dialect": snapshot.datasource.dialect,
                               "description": snapshot.datasource.description},
                "tables": [_table_payload(t) for t in batch],
            }, ensure_ascii=False)
            answers.append(llm.complete_json(SYSTEM_PROMPT, user))
        enriched = _merge(snapshot, answers, model)
        record = enriched.enrichment
        log.info("enriched %s: %d tables, %d columns described, %d synonyms", snapshot.datasource_id,
                 record.tables_described if record else 0, record.columns_described if record else 0,
                 record.synonyms_added if record else 0)
        return EnrichmentOutcome(snapshot=enriched, status="enriched")
    except LLMUnavailableError as exc:
        log.info("enrichment of %s skipped: %s", snapshot.datasource_id, exc)
        return _degraded(snapshot, "unavailable", str(exc), model)
    except Exception as exc:  # noqa: BLE001 - enrichment must never fail indexing
        log.warning("enrichment of %s failed; indexing continues without it", snapshot.datasource_id,
                    exc_info=True)
        return _degraded(snapshot, "failed", f"{type(exc).__name__}: {exc}", model)
