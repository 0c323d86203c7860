"""The retriever's values: requests, hints, configuration and the result (docs/retrieval-result.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Fallback = Literal["no_candidates", "vector_store_unavailable", "small_schema"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class QueryHints(_Frozen):
    """Structured hints a planner may pass along with the question (all optional).

    Each becomes part of the semantic query: ``intent`` and ``expected_schema`` as text,
    ``filters``, ``group_by`` and ``metrics`` as phrases.
    """

    intent: str | None = None
    filters: list[str] = Field(default_factory=list)
    group_by: list[str] = Field(default_factory=list)
    metrics: list[str] = Field(default_factory=list)
    expected_schema: str | None = None

    def texts(self) -> list[str]:
        """The hints as short texts, in a fixed order.

        >>> QueryHints(intent="trend", filters=["year 2024"], metrics=["revenue"]).texts()
        ['trend', 'year 2024', 'revenue']
        """
        out = [self.intent] if self.intent else []
        out += [*self.filters, *self.group_by, *self.metrics]
        if self.expected_schema:
            out.append(self.expected_schema)
        return [t for t in (s.strip() for s in out) if t]


class RetrievalRequest(_Frozen):
    """One question for :meth:`SchemaRetriever.retrieve_batch`."""

    question: str
    datasource: str | None = None
    tenant: str | None = None
    schema_version: str | None = None
    evidence: str | None = None
    hints: QueryHints | None = None


class RankedDatasource(_Frozen):
    id: str
    score: float


class RetrievedTable(_Frozen):
    name: str
    schema_: str | None = Field(default=None, alias="schema", serialization_alias="schema")
    score: float
    columns: list[str]

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class Relationship(_Frozen):
    from_table: str
    from_columns: list[str]
    to_table: str
    to_columns: list[str]
    cardinality: Literal["one-to-one", "many-to-one", "many-to-many"] = "many-to-one"
    inferred: bool = False
    source: Literal["foreign_key", "dbt", "inferred"] = "foreign_key"


class RetrievalResult(_Frozen):
    """What the planner gets; its JSON shape is docs/retrieval-result.md."""

    question: str
    datasources: list[RankedDatasource] = Field(default_factory=list)
    datasource: str | None = None
    schema_version: str | None = None
    tables: list[RetrievedTable] = Field(default_factory=list)
    relationships: list[Relationship] = Field(default_factory=list)
    fallback: str | None = None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    warnings: list[str] = Field(default_factory=list)
    timings_ms: dict[str, float] = Field(default_factory=dict)

    def to_json_dict(self) -> dict[str, object]:
        """The result as docs/retrieval-result.md spells it (a table's schema under the key ``schema``)."""
        return self.model_dump(by_alias=True)

    def model_dump(self, **kwargs: object) -> dict[str, object]:  # type: ignore[override]
        kwargs.setdefault("by_alias", True)
        return super().model_dump(**kwargs)  # type: ignore[arg-type]


class RetrieverConfig(_Frozen):
    """How the retriever trades recall for precision; the defaults are what the benchmark measures.

    Attributes:
        recall_target: the budget per question: the likeliest tables are kept until the estimated
            probability that every table the question needs is among them reaches this (0 < P < 1;
            a question that needs six tables gets six or more, a clear one-table question one;
            see ``budget_sharpness`` for how the estimates are counted).
            None selects by ``table_threshold`` instead. Bridge and link tables join regardless.
        column_recall_target: the same for columns: within the selected tables, the likeliest
            columns are kept until the estimated probability that every needed column is sent
            reaches this. None sends by ``column_cost`` instead. Key and join columns always go.
        column_share_cost: with ``column_recall_target``, a column is also sent whenever its
            estimated need reaches ``1 - exp(-column_share_cost / columns ** 0.75)`` (columns: the
            datasource's; ``ranking.share_priced_threshold``), however sure the budget already is:
            a column is worth sending when its need outweighs its price, and the price falls as
            the schema widens. Held out it finds every gold column for 1 to 3 points more of
            BIRD's questions and about half a point more of Spider's, at the same share of the
            columns as the target alone. With it, the target (0.5) is a floor it rarely sets.
            None: the target alone.
        table_threshold: with ``recall_target`` None, a table is selected when its estimated
            probability of being needed reaches this (the fixed cut-off).
        max_tables: at most this many tables selected by score (bridges come on top).
        budget_sharpness: on a schema of at most ``sharpen_max_tables`` tables, the table budget
            counts each estimate as ``sigmoid(budget_sharpness * logit p)``: the many unlikely
            tables of a schema add up to doubt that keeps tables no question needed, and held out
            (BIRD and Spider) the sharpened count finds every gold table for more questions at the
            same number of tables sent. Only the stopping point moves; the order never does.
        sharpen_max_tables: the largest schema (in tables) whose budget is sharpened (0: none).
            The models were fitted on schemas of at most 26 tables, whose questions need about two;
            on a wider schema (a warehouse whose questions need five tables, the fourth to sixth
            estimated at 0.01 to 0.24) the estimates count as they are, and the tail's doubt keeps
            the tables such questions need.
        column_cost: with ``column_recall_target`` None, within a selected table, a column is sent
            when its estimated probability
            reaches ``1 - exp(-column_cost / columns in the datasource)``: the bigger the schema,
            the cheaper one column (the budget is a share of the schema); key and join columns
            always are.
        min_columns_per_table: the best columns of each selected table sent regardless.
        min_columns_sent: fewer columns in all are topped up with the likeliest others of the
            selected tables (a small schema's columns cost little; held out on Spider's small
            databases, a floor of 6 once raised every gold column found from 76% to 85% of the
            questions, at 33% of the columns instead of 26%; 0 turns it off). 5 with a column
            share cost of 1.0 finds the most columns on every benchmark within BIRD's 25% and
            Spider's 35% of the columns (docs/retrieval-quality.md).
        whole_rows: a question that asks for all the information about something ("all the
            details of", "everything about") gets every column of its likeliest table: its
            answer is whole rows. Held out on Spider it finds every gold column for 0.4 (original)
            and 0.5 (synonyms) points more questions at 0.06 points more of the columns.
        small_schema_columns: when > 0, a datasource with at most this many columns is sent
            whole (``fallback: "small_schema"``); 0 turns the shortcut off.
        dense_k: at most this many chunks per query text are read from the vector store for a
            datasource (the rest count as dissimilar: they get the row's floor). The ranking
            weights were fitted on similarities cut at this k, so changing it moves the figures.
        live_version_ttl_s: how long the vector store's live versions, and the index states its
            searches filter on, are reused (a re-index becomes visible to retrieval within this
            time, the previous version served whole until then; 0 reads them for every call).
        route_candidates: how many datasources routing scores in full (``routing.ROUTE_MODEL`` was
            fitted with 12; its lexical features compare the candidates with each other).
        route_k: vector hits per query text that routing looks at.
        route_lexical_candidates: besides those, up to this many datasources whose vocabulary holds
            most of the question's words (idf over every visible datasource) are scored in full.
        route_meaning_candidates: and up to this many whose table and column names mean most of the
            question's words, one word at a time ("vocalists" for ``singer``).
        infer_joins: join tables on same-named key columns where no foreign key is declared.
        word_meaning: match the question's words to the schema's words by meaning, one word at a
            time ("vocalists" for ``singer``): each schema word is embedded once per version, on
            the first question. False leaves those features at zero (the weights were fitted with them).
        query_adapter: map the query texts' vectors with the shipped query adapter
            (:mod:`~nl2sql_assets.retrieval.query_adapter`) when the embedding model is the one it
            was fitted for; the ranking weights were fitted with it.
        word_association: raise columns whose name words questions with the question's words
            tended to need (:mod:`~nl2sql_assets.retrieval.word_association`, learned across many
            databases: "female" needs ``sex``); False leaves the within-table estimate as the network gives it.
        cache_size: (datasource, version) indexes kept in memory.
    """

    recall_target: float | None = Field(default=0.955, gt=0.0, lt=1.0)
    column_recall_target: float | None = Field(default=0.5, gt=0.0, lt=1.0)
    column_share_cost: float | None = Field(default=1.1, gt=0.0)
    table_threshold: float = Field(default=0.0768, ge=0.0, le=1.0)
    max_tables: int = Field(default=8, ge=1)
    budget_sharpness: float = Field(default=1.5, gt=0.0)
    sharpen_max_tables: int = Field(default=32, ge=0)
    column_cost: float = Field(default=2.99, ge=0.0)
    min_columns_per_table: int = Field(default=1, ge=0)
    min_columns_sent: int = Field(default=5, ge=0)
    whole_rows: bool = True
    small_schema_columns: int = Field(default=0, ge=0)
    dense_k: int = Field(default=60, ge=1)
    live_version_ttl_s: float = Field(default=2.0, ge=0.0)
    route_candidates: int = Field(default=12, ge=1)
    route_k: int = Field(default=40, ge=1)
    route_lexical_candidates: int = Field(default=2, ge=0)
    route_meaning_candidates: int = Field(default=2, ge=0)
    infer_joins: bool = True
    word_meaning: bool = True
    query_adapter: bool = True
    word_association: bool = True
    cache_size: int = Field(default=256, ge=1)
