"""The retriever end to end: the real ONNX model, real embedded Chroma, the real schema store.

On the bundled demo (three datasources, two tenants) and on generated schemas.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from nl2sql_assets.config import Settings, load_datasources
from nl2sql_assets.demo import DEMO_QUESTIONS, create_demo
from nl2sql_assets.indexing.embeddings import EmbeddingService
from nl2sql_assets.indexing.vector_store import build_vector_store
from nl2sql_assets.pipeline.index import index_datasource
from nl2sql_assets.retrieval.models import RetrievalRequest, RetrieverConfig
from nl2sql_assets.retrieval.retriever import SchemaRetriever
from nl2sql_assets.schema.models import Column, DatasourceInfo, ForeignKey, SchemaSnapshot, Table
from nl2sql_assets.schema.store import build_schema_store
from tests.chroma_server import free_port
from tests.chunk_samples import model_provider  # noqa: F401 - fixture
from tests.retrieval_samples import CAPTURED, World, generated_snapshot

pytestmark = pytest.mark.slow
GOLD = Path(__file__).parents[2] / "benchmarks" / "gold" / "demo_questions.jsonl"


@pytest.fixture(scope="session")
def demo_settings(tmp_path_factory: pytest.TempPathFactory, model_provider: object) -> Settings:  # noqa: F811
    """The demo created and indexed (orchestrator path) in a home of its own."""
    home = tmp_path_factory.mktemp("retrieval-demo") / "home"
    path = create_demo(home)
    settings = Settings.from_env({"NL2SQL_HOME": str(home), "NL2SQL_DATASOURCES": str(path)})
    store = build_schema_store(settings)
    embeddings = EmbeddingService(model_provider)  # type: ignore[arg-type]
    vector_store = build_vector_store(settings, embeddings)
    for config in load_datasources(path):
        index_datasource(config, store, vector_store)
    vector_store.close()
    store.close()
    return settings


@pytest.fixture(scope="module")
def retriever(demo_settings: Settings, model_provider: object) -> Iterator[SchemaRetriever]:  # noqa: F811
    store = build_schema_store(demo_settings)
    embeddings = EmbeddingService(model_provider)  # type: ignore[arg-type]
    r = SchemaRetriever(store, build_vector_store(demo_settings, embeddings), embeddings)
    yield r
    store.close()


def test_demo_questions_route_to_their_datasource_and_find_their_tables(retriever: SchemaRetriever) -> None:
    found = 0
    for q in DEMO_QUESTIONS:
        result = retriever.retrieve(q.question)
        assert result.datasource == q.datasource, q.question
        assert result.fallback is None and result.tables
        found += q.tables[0] in {t.name for t in result.tables}
    assert found >= len(DEMO_QUESTIONS) - 1


def test_gold_set_recall_and_precision(retriever: SchemaRetriever) -> None:
    gold = [json.loads(line) for line in GOLD.read_text().splitlines() if line.strip()]
    assert len(gold) >= 40
    results = retriever.retrieve_batch([RetrievalRequest(question=g["question"], datasource=g["datasource"],
                                                         evidence=g["evidence"] or None) for g in gold])
    tables_ok = sum(set(g["gold_tables"]) <= {t.name for t in r.tables} for g, r in zip(gold, results, strict=True))
    sent = sum(len(r.tables) for r in results) / len(results)
    assert tables_ok / len(gold) >= 0.9
    assert sent <= 4.0          # precision: far from the 17 tables of a datasource


def test_relationships_carry_join_pairs_for_the_selected_tables(retriever: SchemaRetriever) -> None:
    result = retriever.retrieve("Average rating of products in each category", datasource="commerce")
    names = {t.name for t in result.tables}
    assert {"reviews", "products", "categories"} <= names
    pairs = {(r.from_table, tuple(r.from_columns), r.to_table, tuple(r.to_columns), r.cardinality)
             for r in result.relationships}
    assert ("reviews", ("product_id",), "products", ("product_id",), "many-to-one") in pairs
    assert ("products", ("category_id",), "categories", ("category_id",), "many-to-one") in pairs
    for rel in result.relationships:
        assert rel.from_table in names and rel.to_table in names


def test_sampled_values_find_the_column_holding_them(retriever: SchemaRetriever) -> None:
    result = retriever.retrieve("How many parcels did PostNL ship?", datasource="commerce")
    tables = {t.name: t.columns for t in result.tables}
    assert "carrier" in tables.get("shipments", [])


def test_tenant_scope_with_the_real_model(retriever: SchemaRetriever) -> None:
    support_question = "Which tickets breached their first-response SLA?"
    assert retriever.retrieve(support_question).datasource == "support"
    scoped = retriever.retrieve(support_question, tenant="acme")
    assert scoped.datasource in {"commerce", "hr"}
    assert {d.id for d in scoped.datasources} <= {"commerce", "hr"}
    assert retriever.retrieve(support_question, tenant="globex").datasource == "support"


def test_vector_store_down_with_the_real_model(demo_settings: Settings, model_provider: object,  # noqa: F811
                                               tmp_path: Path) -> None:
    down_settings = Settings.from_env({"NL2SQL_HOME": str(tmp_path), "CHROMA_HOST": "127.0.0.1",
                                       "CHROMA_PORT": str(free_port())})
    store = build_schema_store(demo_settings)
    embeddings = EmbeddingService(model_provider)  # type: ignore[arg-type]
    r = SchemaRetriever(store, build_vector_store(down_settings, embeddings), embeddings)
    result = r.retrieve("How many vacation days did each employee take?")
    assert result.fallback == "vector_store_unavailable" and result.warnings
    assert result.datasource == "hr"                        # routed by words alone
    assert len(result.tables) == len(store.get_latest("hr").tables)
    store.close()


def test_generated_schema_end_to_end_finds_the_bridge(tmp_path: Path, model_provider: object) -> None:  # noqa: F811
    world = World(tmp_path / "w", model_provider)
    try:
        snap = generated_snapshot(7, datasource_id="gen", entities=("customer", "order", "invoice", "product"),
                                  n_tables=4)
        world.add(snap)
        by_name = {t.name: t for t in snap.tables}
        result = world.retriever().retrieve(
            "For each customer, list the invoices", datasource="gen",
            evidence="customers.customer_id; invoices.invoice_id")
        names = [t.name for t in result.tables]
        assert {"customers", "invoices"} <= set(names)
        # whatever joins them is in the answer: the relationships connect every table sent
        linked = {names[0]}
        for _ in names:
            for rel in result.relationships:
                assert rel.from_table in names and rel.to_table in names
                if linked & {rel.from_table, rel.to_table}:
                    linked |= {rel.from_table, rel.to_table}
        assert linked == set(names)
        assert all(by_name[t.name].column(c) is not None for t in result.tables for c in t.columns)
    finally:
        world.close()


def table(name: str, columns: list[tuple[str, str]], pk: str, fks: dict[str, tuple[str, str]] | None = None) -> Table:
    """A table of (column, type family) pairs; ``fks`` maps a column to the (table, column) it references."""
    keys = [ForeignKey(columns=[c], ref_table=r, ref_columns=[rc]) for c, (r, rc) in (fks or {}).items()]
    return Table(name=name, primary_key=[pk], columns=[Column(name=c, type_family=f) for c, f in columns],
                 foreign_keys=keys)


def racing_snapshot() -> SchemaSnapshot:
    """Drivers, races, results, circuits and constructors: where a racer's name lives is the question."""
    tables = [
        table("circuits", [("circuitId", "integer"), ("circuitRef", "text"), ("name", "text"), ("location", "text"),
                           ("country", "text")], "circuitId"),
        table("races", [("raceId", "integer"), ("year", "integer"), ("round", "integer"), ("circuitId", "integer"),
                        ("name", "text"), ("date", "date")], "raceId", {"circuitId": ("circuits", "circuitId")}),
        table("drivers", [("driverId", "integer"), ("driverRef", "text"), ("forename", "text"), ("surname", "text"),
                          ("nationality", "text")], "driverId"),
        table("constructors", [("constructorId", "integer"), ("name", "text"), ("nationality", "text")],
              "constructorId"),
        table("results", [("resultId", "integer"), ("raceId", "integer"), ("driverId", "integer"),
                          ("constructorId", "integer"), ("position", "integer"), ("points", "float"),
                          ("laps", "integer")],
              "resultId", {"raceId": ("races", "raceId"), "driverId": ("drivers", "driverId"),
                           "constructorId": ("constructors", "constructorId")}),
    ]
    return SchemaSnapshot.create(DatasourceInfo(id="racing", dialect="sqlite"), tables, CAPTURED)


def test_a_persons_name_brings_the_table_of_peoples_names(tmp_path: Path, model_provider: object) -> None:  # noqa: F811
    """Nothing in "Eddie Irvine" says drivers: the entity looks like a person's name, and drivers
    holds forenames and surnames."""
    world = World(tmp_path / "w", model_provider)
    try:
        world.add(racing_snapshot())
        question = "What is Eddie Irvine's average points scored in year 2000?"
        # the default budget keeps at least two tables here: the named person's drivers and results
        # (since the thesaurus refit; before it, races and results). The signal itself
        # is checked: drivers is far likelier with the name than without it, and a higher target
        # brings all three, drivers with its name columns.
        named = world.retriever().retrieve(question, datasource="racing")
        nameless = world.retriever().retrieve("What is the average points scored in year 2000?",
                                              datasource="racing")
        score = {t.name: t.score for t in named.tables}

        def drivers_score(result) -> float:  # type: ignore[no-untyped-def]
            full = world.retriever(RetrieverConfig(recall_target=0.999)).retrieve(result.question,
                                                                                   datasource="racing")
            return next(t.score for t in full.tables if t.name == "drivers")

        assert {"drivers", "results"} <= set(score), score
        assert drivers_score(named) > 3 * drivers_score(nameless)
        result = world.retriever(RetrieverConfig(recall_target=0.99)).retrieve(question, datasource="racing")
        names = {t.name for t in result.tables}
        assert {"drivers", "results", "races"} <= names, names
        drivers = next(t for t in result.tables if t.name == "drivers")
        assert {"forename", "surname"} & set(drivers.columns)
    finally:
        world.close()


def club_snapshot() -> SchemaSnapshot:
    """Members, their zip codes, events and attendance: where a member's state lives is the question."""
    tables = [
        table("zip_code", [("zip_code", "integer"), ("type", "text"), ("city", "text"), ("county", "text"),
                           ("state", "text"), ("short_state", "text")], "zip_code"),
        table("member", [("member_id", "text"), ("first_name", "text"), ("last_name", "text"), ("email", "text"),
                         ("position", "text"), ("t_shirt_size", "text"), ("phone", "text"), ("zip", "integer")],
              "member_id", {"zip": ("zip_code", "zip_code")}),
        table("event", [("event_id", "text"), ("event_name", "text"), ("event_date", "text"), ("type", "text"),
                        ("location", "text"), ("status", "text")], "event_id"),
        table("attendance", [("link_to_event", "text"), ("link_to_member", "text")], "link_to_event",
              {"link_to_event": ("event", "event_id"), "link_to_member": ("member", "member_id")}),
    ]
    return SchemaSnapshot.create(DatasourceInfo(id="club", dialect="sqlite"), tables, CAPTURED)


def test_a_place_brings_the_table_of_places(tmp_path: Path, model_provider: object) -> None:  # noqa: F811
    """"Maryland" names no column: the entity looks like a place, and zip_code holds states."""
    world = World(tmp_path / "w", model_provider)
    try:
        world.add(club_snapshot())
        # since the word-meaning fit the default budget stops at member and attendance here (member
        # alone is likelier); the signal is checked as for people: zip_code is far likelier with a
        # place than without one (odds, as the query adapter already raises it for "hometowns"),
        # and a higher target brings it
        def zip_odds(question: str) -> float:
            full = world.retriever(RetrieverConfig(recall_target=0.999)).retrieve(question, datasource="club")
            score = next(t.score for t in full.tables if t.name == "zip_code")
            return score / (1 - score)

        question = "How many of the members' hometowns are from Maryland?"
        assert zip_odds(question) > 5 * zip_odds("How many of the members' hometowns are there?")
        result = world.retriever(RetrieverConfig(recall_target=0.9)).retrieve(question, datasource="club")
        names = [t.name for t in result.tables]
        assert names[0] == "member" and "zip_code" in names, names
    finally:
        world.close()


def concerts_snapshot() -> SchemaSnapshot:
    """Singers, stadiums and concerts, asked about in other words: vocalists, performers, venues."""
    tables = [
        table("stadium", [("stadium_id", "integer"), ("location", "text"), ("name", "text"), ("capacity", "integer"),
                          ("highest", "integer"), ("lowest", "integer"), ("average", "integer")], "stadium_id"),
        table("singer", [("singer_id", "integer"), ("name", "text"), ("country", "text"), ("song_name", "text"),
                         ("song_release_year", "text"), ("age", "integer"), ("is_male", "boolean")], "singer_id"),
        table("concert", [("concert_id", "integer"), ("concert_name", "text"), ("theme", "text"),
                          ("stadium_id", "integer"), ("year", "text")], "concert_id",
              {"stadium_id": ("stadium", "stadium_id")}),
        table("singer_in_concert", [("concert_id", "integer"), ("singer_id", "integer")], "concert_id",
              {"concert_id": ("concert", "concert_id"), "singer_id": ("singer", "singer_id")}),
    ]
    return SchemaSnapshot.create(DatasourceInfo(id="concerts", dialect="sqlite"), tables, CAPTURED)


def test_questions_in_other_words_find_the_schema_by_word_meaning(tmp_path: Path,
                                                                  model_provider: object) -> None:  # noqa: F811
    """No word of these questions is in the schema: "vocalists" means singer, "venues" stadium.
    Word meaning (``RetrieverConfig.word_meaning``) is what brings the column and raises the table
    (the query adapter alone already finds the singers for "vocalists", less surely)."""
    world = World(tmp_path / "w", model_provider)
    try:
        world.add(concerts_snapshot())

        def ask(question: str, word_meaning: bool) -> dict[str, tuple[float, list[str]]]:
            # the columns by meaning alone, under a tight column budget: what word meaning adds shows
            config = RetrieverConfig(word_meaning=word_meaning, min_columns_sent=0, column_recall_target=0.5)
            result = world.retriever(config).retrieve(question, datasource="concerts")
            return {t.name: (t.score, t.columns) for t in result.tables}

        question = "How many vocalists are there?"
        with_meaning, without = ask(question, True), ask(question, False)
        assert next(iter(with_meaning)) == "singer" and with_meaning["singer"][0] > without["singer"][0] + 0.05
        question = "What are the names of the performers older than 40?"
        with_meaning, without = ask(question, True), ask(question, False)
        assert {"name", "age"} <= set(with_meaning["singer"][1])
        question = "Show the names of all venues and how many people they hold."
        with_meaning, without = ask(question, True), ask(question, False)
        assert next(iter(with_meaning)) == "stadium" and with_meaning["stadium"][0] > without["stadium"][0] + 0.05
    finally:
        world.close()
