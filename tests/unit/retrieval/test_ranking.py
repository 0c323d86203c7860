"""Hybrid scoring and the adaptive selection, on generated schemas with controlled similarities."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from pydantic import ValidationError

from nl2sql_assets.retrieval import ranking
from nl2sql_assets.retrieval.entity_kinds import EntityKinds
from nl2sql_assets.retrieval.lexical import build_query_terms
from nl2sql_assets.retrieval.models import RetrieverConfig
from nl2sql_assets.retrieval.word_similarity import WordScores, question_words, word_scores
from nl2sql_assets.schema.models import Column, DatasourceInfo, ForeignKey, SchemaSnapshot, Table
from tests.retrieval_samples import CAPTURED


def shop() -> SchemaSnapshot:
    def t(name: str, cols: list[str], pk: str, fks: dict[str, str] | None = None) -> Table:
        return Table(name=name, primary_key=[pk], columns=[Column(name=c, type_family="text") for c in cols],
                     foreign_keys=[ForeignKey(columns=[c], ref_table=r, ref_columns=[c]) for c, r in (fks or {}).items()])
    tables = [
        t("customers", ["customer_id", "first_name", "last_name", "city", "loyalty_tier"], "customer_id"),
        t("orders", ["order_id", "customer_id", "ordered_at", "total", "status"], "order_id",
          {"customer_id": "customers"}),
        t("order_items", ["order_id", "line_no", "product_id", "quantity"], "line_no",
          {"order_id": "orders", "product_id": "products"}),
        t("products", ["product_id", "name", "unit_price", "category"], "product_id"),
        t("suppliers", ["supplier_id", "company_name", "country"], "supplier_id"),
    ]
    return SchemaSnapshot.create(DatasourceInfo(id="shop", dialect="sqlite"), tables, CAPTURED)


def dense_for(index: ranking.SchemaIndex, snapshot: SchemaSnapshot, liked: dict[str, float],
              segments: int = 1) -> ranking.DenseScores:
    """Similarities of 0.1 everywhere except the named ``table`` or ``table.column`` chunks."""
    tables = np.full((segments, len(snapshot.tables)), 0.1)
    columns = np.full((segments, len(index.lexical.columns)), 0.1)
    for ti, table in enumerate(snapshot.tables):
        tables[:, ti] = liked.get(table.name, 0.1)
    for ci, col in enumerate(index.lexical.columns):
        key = f"{index.lexical.tables[index.lexical.column_table[ci]].name}.{col.name}"
        columns[:, ci] = liked.get(key, 0.1)
    return ranking.DenseScores(tables=tables, columns=columns, entities=np.zeros((0, columns.shape[1])))


def names(snapshot: SchemaSnapshot, selection: ranking.Selection) -> list[str]:
    return [snapshot.tables[t].name for t in selection.tables]


def test_scores_have_one_probability_per_table_and_column() -> None:
    snap = shop()
    index = ranking.build_schema_index(snap)
    scores = ranking.score_schema(index, build_query_terms("total of orders"), dense_for(index, snap, {}))
    assert scores.table_prob.shape == (5,) and scores.within_prob.shape == (len(index.lexical.columns),)
    assert np.all((scores.table_prob >= 0) & (scores.table_prob <= 1))
    assert scores.column_features.shape[1] == len(ranking.COLUMN_FEATURES)
    assert scores.table_features.shape[1] == len(ranking.TABLE_FEATURES)


def test_evidence_for_a_table_raises_its_probability() -> None:
    snap = shop()
    index = ranking.build_schema_index(snap)
    terms = build_query_terms("Who provides the goods we sell, and from where?")  # no schema word: dense only
    plain = ranking.score_schema(index, terms, dense_for(index, snap, {}))
    liked = ranking.score_schema(index, terms, dense_for(index, snap, {"suppliers": 0.8, "suppliers.company_name": 0.8,
                                                                "suppliers.country": 0.8}))
    s = [t.name for t in snap.tables].index("suppliers")
    assert liked.table_prob[s] > 5 * plain.table_prob[s]
    # from the least likely table to ahead of the tables the question gives no evidence for (at
    # most customers, the hub whose keys every join needs, may stay ahead)
    assert int(np.argmin(plain.table_prob)) == s
    assert s in np.argsort(-liked.table_prob)[:2].tolist()


def test_selection_is_adaptive_and_adds_bridges_with_join_columns() -> None:
    snap = shop()
    index = ranking.build_schema_index(snap)
    terms = build_query_terms("Which products did customers in Lyon buy? products.name customers.city")
    scores = ranking.score_schema(index, terms, dense_for(index, snap, {
        "customers": 0.6, "products": 0.6, "customers.city": 0.7, "products.name": 0.7}))
    sel = ranking.select(index, scores, table_threshold=0.2, max_tables=2, column_threshold=0.5, min_columns=1)
    assert set(names(snap, sel)[:2]) == {"customers", "products"}
    assert set(names(snap, sel)[2:]) == {"orders", "order_items"}        # the bridge
    cols = {snap.tables[t].name: {index.lexical.columns[c].name for c in cs} for t, cs in sel.columns.items()}
    assert {"order_id", "customer_id"} <= cols["orders"]                   # join keys of the bridge
    assert {"order_id", "product_id"} <= cols["order_items"]
    assert "city" in cols["customers"] and "name" in cols["products"]
    strict = ranking.select(index, scores, table_threshold=1.0, max_tables=5, column_threshold=0.5, min_columns=1)
    assert len(strict.tables) == 1                                         # never empty, even above every score


def test_column_threshold_trades_columns_for_recall() -> None:
    snap = shop()
    index = ranking.build_schema_index(snap)
    scores = ranking.score_schema(index, build_query_terms("order totals by status"),
                                  dense_for(index, snap, {"orders": 0.7, "orders.total": 0.6, "orders.status": 0.6}))
    loose = ranking.select(index, scores, table_threshold=0.5, max_tables=1, column_threshold=0.0, min_columns=0)
    tight = ranking.select(index, scores, table_threshold=0.5, max_tables=1, column_threshold=1.0, min_columns=1)
    (t,) = loose.tables
    assert len(loose.columns[t]) == len(snap.tables[t].columns)
    assert len(tight.columns[t]) == 1


def test_whole_rows_send_every_column_of_the_likeliest_table_only() -> None:
    snap = shop()
    index = ranking.build_schema_index(snap)
    scores = ranking.score_schema(index, build_query_terms("order totals by status"),
                                  dense_for(index, snap, {"orders": 0.7, "customers": 0.5, "orders.total": 0.6}))
    cut = {"table_threshold": 0.0, "max_tables": 2, "column_threshold": 1.0, "min_columns": 1}
    budget = ranking.select(index, scores, **cut)  # type: ignore[arg-type]
    whole = ranking.select(index, scores, **cut, whole_rows=True)  # type: ignore[arg-type]
    assert budget.tables == whole.tables and len(whole.tables) == 2
    top, other = whole.tables
    assert snap.tables[top].name == "orders" and len(whole.columns[top]) == len(snap.tables[top].columns)
    assert len(budget.columns[top]) < len(snap.tables[top].columns)
    assert whole.columns[other] == budget.columns[other]  # the other tables keep their budget


def test_value_hits_point_to_the_column_holding_the_value() -> None:
    from nl2sql_assets.schema.models import ColumnStats

    snap = shop()
    tables = list(snap.tables)
    customers = tables[[t.name for t in tables].index("customers")]
    cols = [c.model_copy(update={"stats": ColumnStats(top_values=["Lyon", "Porto"])}) if c.name == "city" else c
            for c in customers.columns]
    tables[tables.index(customers)] = customers.model_copy(update={"columns": cols})
    snap = SchemaSnapshot.create(snap.datasource, tables, CAPTURED)
    index = ranking.build_schema_index(snap)
    dense = dense_for(index, snap, {})
    with_value = ranking.score_schema(index, build_query_terms("How many live in 'Lyon'?"), dense)
    without = ranking.score_schema(index, build_query_terms("How many live in 'Paris'?"), dense)
    city = next(i for i, c in enumerate(index.lexical.columns) if c.name == "city")
    assert with_value.column_logit[city] - without.column_logit[city] >= ranking.VALUE_HIT_WEIGHT - 1e-6


def test_a_proper_noun_in_the_question_favours_name_columns() -> None:
    snap = shop()
    index = ranking.build_schema_index(snap)
    first = [c.name for c in index.lexical.columns].index("first_name")
    city = [c.name for c in index.lexical.columns].index("city")
    with_name = ranking.score_schema(index, build_query_terms("Which orders did Ada Lovelace place?"),
                                     dense_for(index, snap, {}))
    without = ranking.score_schema(index, build_query_terms("Which orders did she place?"), dense_for(index, snap, {}))
    j = ranking.COLUMN_FEATURES.index("entity_name")
    assert with_name.column_features[first, j] == 1.0 and with_name.column_features[city, j] == 0.0
    assert without.column_features[first, j] == 0.0
    assert with_name.column_logit[first] > without.column_logit[first]


def test_graph_degree_features_are_capped() -> None:
    hub = Table(name="match", primary_key=["id"], columns=[Column(name="id")] + [
        Column(name=f"player_{i}") for i in range(12)], foreign_keys=[
        ForeignKey(columns=[f"player_{i}"], ref_table=f"p{i}", ref_columns=["id"]) for i in range(12)])
    players = [Table(name=f"p{i}", primary_key=["id"], columns=[Column(name="id")]) for i in range(12)]
    snap = SchemaSnapshot.create(DatasourceInfo(id="hub", dialect="sqlite"), [hub, *players], CAPTURED)
    index = ranking.build_schema_index(snap)
    assert len(index.graph.adjacent[0]) == 12
    assert index.degree[0] == index.out_degree[0] == ranking.DEGREE_CAP


def exact_words(index: ranking.SchemaIndex, terms) -> WordScores:  # type: ignore[no-untyped-def]
    """Word meaning where each question word means only the same schema word (one-hot vectors)."""
    tokens = index.words.tokens
    eye = np.eye(len(tokens) + 1)
    question = np.vstack([eye[tokens.index(w)] if w in tokens else eye[-1] for w in question_words(terms)])
    return word_scores(index.words, eye[:-1], question)


def test_a_table_explaining_words_the_top_table_cannot_is_raised() -> None:
    snap = shop()
    index = ranking.build_schema_index(snap)
    terms = build_query_terms("Total of orders by loyalty tier")
    words = exact_words(index, terms)
    scores = ranking.score_schema(index, terms, dataclasses.replace(dense_for(index, snap, {}), words=words))
    names = [t.name for t in snap.tables]
    first = ranking.TABLE_MODEL.prob(scores.table_features)
    # whichever of the two the first model puts on top, the other explains the words it cannot
    top = names[int(np.argmax(first))]
    assert top in ("customers", "orders")
    other = names.index("orders" if top == "customers" else "customers")
    x = ranking.context_features(index, first, scores.table_features, terms, words)
    for feature in ("residual_cov", "word_residual"):  # by spelling and by meaning
        j = ranking.CONTEXT_FEATURES.index(feature)
        assert x[other, j] > 0.0 and x[names.index(top), j] == 0.0 and x[names.index("suppliers"), j] == 0.0
    without = ranking.CONTEXT_MODEL.prob(ranking.context_features(index, first, scores.table_features))
    assert scores.table_prob[other] > without[other]


def test_a_proper_noun_the_top_table_cannot_hold_points_to_tables_with_name_columns() -> None:
    snap = shop()
    index = ranking.build_schema_index(snap)
    names = [t.name for t in snap.tables]
    j = ranking.CONTEXT_FEATURES.index("residual_name")

    def residual_name(question: str) -> np.ndarray:
        terms = build_query_terms(question)
        scores = ranking.score_schema(index, terms, dense_for(index, snap, {"orders": 0.8, "orders.total": 0.8}))
        first = ranking.TABLE_MODEL.prob(scores.table_features)
        assert names[int(np.argmax(first))] == "orders"
        return ranking.context_features(index, first, scores.table_features, terms)[:, j]

    # orders has no name column: Ada Lovelace lives in customers (first_name) or products (name)
    with_noun = residual_name("Total of the orders Ada Lovelace placed")
    assert with_noun[names.index("customers")] == with_noun[names.index("products")] == 1.0
    assert with_noun[names.index("orders")] == with_noun[names.index("order_items")] == 0.0
    assert not residual_name("Total of the orders placed last week").any()


def test_each_entity_credits_the_text_column_most_like_it() -> None:
    """An entity's home is its nearest text column, even when that similarity is low in absolute
    terms ("Lewis Hamilton" is closest to a surname column at 0.2); numeric columns are no home."""
    snap = shop()
    index = ranking.build_schema_index(snap)
    cols = [f"{index.lexical.tables[index.lexical.column_table[ci]].name}.{c.name}"
            for ci, c in enumerate(index.lexical.columns)]
    numeric = SchemaSnapshot.create(snap.datasource, [t.model_copy(update={"columns": [
        c.model_copy(update={"type_family": "integer"}) if c.name == "customer_id" else c for c in t.columns]})
        for t in snap.tables], CAPTURED)
    index = ranking.build_schema_index(numeric)
    terms = build_query_terms("Which orders did Ada Lovelace place in 'Lisbon'?")
    assert terms.entities == ("Lisbon", "Ada Lovelace")
    entities = np.full((2, len(cols)), 0.05)
    entities[0, cols.index("customers.city")] = 0.2
    entities[1, cols.index("customers.last_name")] = 0.18
    entities[1, cols.index("orders.customer_id")] = 0.3  # nearer, but a key column holds no name
    plain = dense_for(index, numeric, {})
    dense = ranking.DenseScores(tables=plain.tables, columns=plain.columns, entities=entities)
    scores = ranking.score_schema(index, terms, dense)
    j = ranking.COLUMN_FEATURES.index("entity_home")
    homes = {cols[ci] for ci in np.flatnonzero(scores.column_features[:, j])}
    assert homes == {"customers.city", "customers.last_name"}
    t = ranking.TABLE_FEATURES.index("entity_home")
    assert scores.table_features[[s.name for s in numeric.tables].index("customers"), t] == 1.0
    assert scores.table_features[:, t].sum() == 1.0
    elsewhere = np.full((2, len(cols)), 0.05)
    elsewhere[:, cols.index("products.name")] = 0.2  # the same question, its entities at home in products
    away = ranking.score_schema(index, terms, ranking.DenseScores(tables=plain.tables, columns=plain.columns,
                                                                  entities=elsewhere))
    assert away.table_features[[s.name for s in numeric.tables].index("products"), t] == 1.0
    # the evidence stage (logistic, evidence weights >= 0) credits customers less and products more;
    # the final estimate (averaged with a network, which is not monotone) moves products up too
    products = [s.name for s in numeric.tables].index("products")
    first, first_away = ranking.TABLE_MODEL.prob(scores.table_features), ranking.TABLE_MODEL.prob(away.table_features)
    assert first_away[0] < first[0] and first_away[products] > first[products]
    assert away.table_prob[products] > scores.table_prob[products]
    # the vector store returned no text column for either entity: every one holds the row's floor
    floor = np.full((2, len(cols)), 0.05)
    floor[:, cols.index("orders.customer_id")] = 0.3
    unseen = ranking.score_schema(index, terms, ranking.DenseScores(tables=plain.tables, columns=plain.columns,
                                                                    entities=floor))
    assert not unseen.column_features[:, j].any()


def test_a_person_or_place_like_entity_points_to_the_columns_of_peoples_names_or_places() -> None:
    """"Eddie Irvine" is a person: the table with first and last names gains; a product's name,
    a company name and a city do not. "Lisbon" is a place: the table with a city gains in the
    evidence stage (whose evidence weights cannot be negative); the context stage's network, which
    weighs every feature together and is not monotone in any, keeps it within ten points for a
    place alone. The same
    entity scored as neither changes nothing."""
    snap = shop()
    index = ranking.build_schema_index(snap)
    tables = [t.name for t in snap.tables]
    cols = [f"{index.lexical.tables[index.lexical.column_table[ci]].name}.{c.name}"
            for ci, c in enumerate(index.lexical.columns)]
    terms = build_query_terms("Total of the orders Eddie Irvine placed")
    assert terms.entities == ("Eddie Irvine",)
    plain = dense_for(index, snap, {"orders": 0.6, "orders.total": 0.6})
    entities = np.full((1, len(cols)), 0.05)

    def score(person: float, place: float) -> ranking.SchemaScores:
        return ranking.score_schema(index, terms, ranking.DenseScores(
            tables=plain.tables, columns=plain.columns, entities=entities,
            kinds=EntityKinds(person=np.array([person]), place=np.array([place]))))

    def marked(scores: ranking.SchemaScores, feature: str) -> set[str]:
        return {cols[ci] for ci in np.flatnonzero(scores.column_features[:, ranking.COLUMN_FEATURES.index(feature)])}

    person, place, neither = score(0.2, 0.0), score(0.0, 0.2), score(0.0, 0.0)
    assert marked(person, "entity_person") == {"customers.first_name", "customers.last_name"}
    assert marked(place, "entity_place") == {"customers.city", "suppliers.country"}
    assert not marked(neither, "entity_person") and not marked(neither, "entity_place")
    assert not marked(person, "entity_place") and not marked(place, "entity_person")
    t = ranking.TABLE_FEATURES.index("entity_person")
    assert person.table_features[tables.index("customers"), t] == pytest.approx(0.2)
    customers = tables.index("customers")
    assert person.table_prob[customers] > neither.table_prob[customers]
    first = {name: ranking.TABLE_MODEL.prob(scores.table_features)[customers]
             for name, scores in (("person", person), ("place", place), ("neither", neither))}
    assert first["person"] > first["neither"] and first["place"] > first["neither"]
    assert place.table_prob[customers] == pytest.approx(neither.table_prob[customers], abs=0.1)
    assert person.table_prob[tables.index("products")] == pytest.approx(
        neither.table_prob[tables.index("products")], abs=0.02)


# ---------------------------------------------------------------- the budget per question


def chain(n: int) -> SchemaSnapshot:
    """``n`` tables in a chain (t1 -> t0, t2 -> t1, ...), four columns each."""
    tables = []
    for i in range(n):
        cols = [f"t{i}_id", f"a{i}", f"b{i}", f"c{i}"] + ([f"t{i - 1}_id"] if i else [])
        fks = [ForeignKey(columns=[f"t{i - 1}_id"], ref_table=f"t{i - 1}", ref_columns=[f"t{i - 1}_id"])] if i else []
        tables.append(Table(name=f"t{i}", primary_key=[f"t{i}_id"], foreign_keys=fks,
                            columns=[Column(name=c, type_family="text") for c in cols]))
    return SchemaSnapshot.create(DatasourceInfo(id="chain", dialect="sqlite"), tables, CAPTURED)


def with_probs(index: ranking.SchemaIndex, table_prob: list[float], column_prob: float = 0.01) -> ranking.SchemaScores:
    base = ranking.score_schema(index, build_query_terms("anything"),
                                ranking.DenseScores(tables=np.full((1, len(table_prob)), 0.1),
                                                    columns=np.full((1, len(index.lexical.columns)), 0.1),
                                                    entities=np.zeros((0, len(index.lexical.columns)))))
    within = np.full(len(index.lexical.columns), column_prob)
    return dataclasses.replace(base, table_prob=np.array(table_prob), within_prob=within)


def test_budget_count_keeps_the_likeliest_until_the_rest_is_unlikely_enough() -> None:
    assert ranking.budget_count(np.array([0.99, 0.001, 0.001]), 0.9) == 1
    assert ranking.budget_count(np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.01]), 0.9) == 6
    assert ranking.budget_count(np.array([0.5, 0.5]), 0.99) == 2          # everything, when nothing less will do
    assert ranking.budget_count(np.array([0.01, 0.01]), 0.9, minimum=0) == 0
    assert ranking.budget_count(np.array([0.3, 0.3, 0.3]), 0.5) > ranking.budget_count(np.array([0.3, 0.3, 0.3]), 0.2)


def test_a_question_needing_six_tables_gets_six_and_a_clear_one_gets_one() -> None:
    snap = chain(9)
    index = ranking.build_schema_index(snap)
    many = with_probs(index, [0.95, 0.9, 0.9, 0.85, 0.8, 0.8, 0.02, 0.01, 0.01])
    kw = dict(table_threshold=0.5, max_tables=12, column_threshold=0.5, min_columns=1)
    sel = ranking.select(index, many, recall_target=0.9, **kw)  # type: ignore[arg-type]
    assert {"t0", "t1", "t2", "t3", "t4", "t5"} <= set(names(snap, sel))
    one = with_probs(index, [0.99, 0.003, 0.002, 0.001, 0.001, 0.001, 0.001, 0.001, 0.001])
    assert names(snap, ranking.select(index, one, recall_target=0.9, **kw)) == ["t0"]  # type: ignore[arg-type]
    # a higher target buys recall with more tables; max_tables caps what the score selects
    vague = with_probs(index, [0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05, 0.05, 0.05])
    low = ranking.select(index, vague, recall_target=0.3, **kw)  # type: ignore[arg-type]
    high = ranking.select(index, vague, recall_target=0.95, **kw)  # type: ignore[arg-type]
    assert set(low.tables) < set(high.tables)
    capped = ranking.select(index, vague, recall_target=0.95, **{**kw, "max_tables": 2})  # type: ignore[arg-type]
    assert set(capped.tables) >= {0, 1} and len(capped.tables) < len(high.tables)


def test_sharpened_estimates_push_extremes_apart_and_keep_the_order() -> None:
    p = np.array([0.9, 0.5, 0.2, 0.01])
    s = ranking.sharpened(p, 2.0)
    assert s[0] > 0.98 and s[1] == pytest.approx(0.5) and s[2] < 0.06 and s[3] < 1e-3
    assert list(np.argsort(-s)) == list(np.argsort(-p))
    assert ranking.sharpened(p, 1.0) is p


def test_the_table_budget_counts_sharpened_estimates_only_on_schemas_up_to_the_gate() -> None:
    # a clear first table and a tail of doubtful ones: counted as they are, the tail's doubt adds up
    # and keeps a second table; sharpened, the tail counts for little and the first one is enough
    probs = [0.95, 0.3, 0.2, 0.15, 0.1, 0.08, 0.05, 0.03, 0.02]
    snap = chain(len(probs))
    index = ranking.build_schema_index(snap)
    scores = with_probs(index, probs)
    kw = dict(table_threshold=0.5, max_tables=12, column_threshold=0.5, min_columns=1, recall_target=0.5)
    plain = ranking.select(index, scores, **kw)  # type: ignore[arg-type]
    sharp = ranking.select(index, scores, budget_sharpness=1.5, sharpen_max_tables=32, **kw)  # type: ignore[arg-type]
    assert len(sharp.tables) < len(plain.tables)
    assert sharp.tables == plain.tables[:len(sharp.tables)]       # the likeliest first either way
    # a schema with more tables than the gate: the estimates count as they are (the fits saw schemas
    # of at most 26 tables; a warehouse's fourth to sixth tables get low estimates the tail's doubt must keep)
    narrow_gate = len(probs) - 1
    gated = ranking.select(index, scores, budget_sharpness=1.5, sharpen_max_tables=narrow_gate, **kw)  # type: ignore[arg-type]
    assert gated.tables == plain.tables


def test_the_default_config_sharpens_only_schemas_no_larger_than_the_fitted_ones() -> None:
    cfg = RetrieverConfig()
    assert cfg.budget_sharpness > 1.0 and 26 <= cfg.sharpen_max_tables < 100
    with pytest.raises(ValidationError, match="budget_sharpness"):
        RetrieverConfig(budget_sharpness=0)


def test_the_column_budget_sends_more_columns_for_a_higher_target() -> None:
    snap = chain(3)
    index = ranking.build_schema_index(snap)
    scores = with_probs(index, [0.99, 0.001, 0.001])
    rng = np.random.default_rng(3)
    scores = dataclasses.replace(scores, within_prob=rng.uniform(0.05, 0.6, len(index.lexical.columns)))
    kw = dict(table_threshold=0.5, max_tables=12, column_threshold=0.5, min_columns=0, recall_target=0.9)
    loose = ranking.select(index, scores, column_recall_target=0.2, **kw)  # type: ignore[arg-type]
    tight = ranking.select(index, scores, column_recall_target=0.95, **kw)  # type: ignore[arg-type]
    assert len(loose.columns[0]) < len(tight.columns[0])
    # the columns left out are the least likely, and together unlikely enough for the target
    left = [ci for ci in np.flatnonzero(index.lexical.column_table_arr == 0) if ci not in tight.columns[0]]
    assert np.prod(1 - scores.within_prob[left]) >= 0.95
    assert all(scores.within_prob[ci] <= scores.within_prob[tight.columns[0]].min() for ci in left)


def test_a_column_worth_its_price_is_sent_however_sure_the_budget_already_is() -> None:
    """The target alone stops once the rest looks unlikely enough together (here after ``a0``);
    a priced column goes whenever its own need outweighs its price, which falls as the schema
    widens; a price above every need leaves the budget's choice as it was."""
    snap = chain(3)
    index = ranking.build_schema_index(snap)
    names = [c.name for c in index.lexical.columns]
    within = np.array([{"a0": 0.99, "b0": 0.3}.get(n, 0.01) for n in names])
    scores = dataclasses.replace(with_probs(index, [0.99, 0.001, 0.001]), within_prob=within)
    kw = dict(table_threshold=0.5, max_tables=12, column_threshold=0.5, min_columns=0, recall_target=0.9,
              column_recall_target=0.5)

    def sent(cost: float | None) -> list[str]:
        sel = ranking.select(index, scores, column_share_cost=cost, **kw)  # type: ignore[arg-type]
        assert sel.tables == [0]
        return [names[ci] for ci in sel.columns[0]]

    assert sent(None) == ["a0"]
    assert sent(1.0) == ["a0", "b0"]                     # need 0.29 against a price of 0.13 (14 columns)
    assert sent(5.0) == sent(None)                       # priced at 0.50: not worth it
    assert ranking.share_priced_threshold(1.0, 14) < 0.297 < ranking.share_priced_threshold(5.0, 14)
    prices = [ranking.share_priced_threshold(1.0, n) for n in (5, 14, 64, 1500)]
    assert prices == sorted(prices, reverse=True) and prices[-1] > 0  # cheaper in a wider schema, never free


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_a_column_price_must_be_positive(bad: float) -> None:
    with pytest.raises(ValidationError, match="column_share_cost"):
        RetrieverConfig(column_share_cost=bad)
    assert RetrieverConfig(column_share_cost=None).column_share_cost is None  # the target alone


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.2])
def test_recall_targets_outside_zero_one_are_refused(bad: float) -> None:
    from pydantic import ValidationError

    from nl2sql_assets.retrieval.models import RetrieverConfig

    with pytest.raises(ValidationError, match="recall_target"):
        RetrieverConfig(recall_target=bad)
    with pytest.raises(ValidationError, match="column_recall_target"):
        RetrieverConfig(column_recall_target=bad)
    assert RetrieverConfig(recall_target=None).recall_target is None  # the fixed cut-offs instead


def test_one_part_of_a_persons_name_brings_the_others() -> None:
    """first_name sent alone would answer "Ada" but not "Ada Lovelace"; last_name comes with it.
    A table without a sent name part gets none added."""
    snap = shop()
    index = ranking.build_schema_index(snap)
    cols = [f"{index.lexical.tables[index.lexical.column_table[i]].name}.{c.name}"
            for i, c in enumerate(index.lexical.columns)]
    names = [t.name for t in snap.tables]

    def selected(liked: str) -> dict[str, list[str]]:
        table_prob = np.array([1.0 if n in ("customers", "orders") else 0.0 for n in names])
        within = np.array([0.99 if c == liked else 0.01 for c in cols])
        scores = ranking.SchemaScores(table_prob=table_prob, column_logit=np.zeros(len(cols)),
                                      column_prob=within, within_prob=within,
                                      column_features=np.zeros((len(cols), 1)), table_features=np.zeros((len(names), 1)))
        sel = ranking.select(index, scores, table_threshold=0.5, max_tables=2, column_threshold=0.5, min_columns=0,
                             recall_target=0.9, column_recall_target=0.9)
        return {names[t]: sorted(index.lexical.columns[ci].name for ci in cs) for t, cs in sel.columns.items()}

    with_name = selected("customers.first_name")
    assert {"first_name", "last_name"} <= set(with_name["customers"]), with_name
    without = selected("customers.city")
    assert "last_name" not in without["customers"] and "first_name" not in without["customers"], without


def test_too_few_columns_in_all_are_topped_up_with_the_likeliest_others() -> None:
    """A clear one-table question's budget by probability can stop at two columns; with
    ``min_columns_sent`` the next likeliest columns of the selected tables (by table times within
    probability) make up the number, and a selection already that large is left as it is."""
    snap = chain(3)
    index = ranking.build_schema_index(snap)
    scores = with_probs(index, [0.99, 0.6, 0.001])
    table_of = index.lexical.column_table_arr
    within = np.where(table_of == 0, 0.02, 0.5)
    within[np.flatnonzero(table_of == 0)[0]] = 0.99
    scores = dataclasses.replace(scores, within_prob=within)
    kw = dict(table_threshold=0.5, max_tables=12, column_threshold=0.5, min_columns=0, recall_target=0.5,
              column_recall_target=0.3)
    plain = ranking.select(index, scores, **kw)  # type: ignore[arg-type]
    sent = sum(len(c) for c in plain.columns.values())
    topped = ranking.select(index, scores, min_columns_sent=sent + 3, **kw)  # type: ignore[arg-type]
    assert plain.tables == topped.tables and sum(len(c) for c in topped.columns.values()) == sent + 3
    added = [ci for t, cs in topped.columns.items() for ci in cs if ci not in plain.columns[t]]
    need = scores.table_prob[table_of] * within
    left = [ci for t in plain.tables for ci in np.flatnonzero(table_of == t)
            if ci not in topped.columns[t]]
    assert min(need[added]) >= max(need[left], default=0.0)  # the likeliest of the rest
    assert ranking.select(index, scores, min_columns_sent=sent, **kw) == plain  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="min_columns_sent"):
        from nl2sql_assets.retrieval.models import RetrieverConfig

        RetrieverConfig(min_columns_sent=-1)


def test_a_middling_first_estimate_counts_for_more_in_a_small_schema() -> None:
    """Held out, a table estimated at 0.2-0.5 among one or two tables was needed about half the time,
    among nine to fifteen about a fifth: the context stage sees the schema's size (capped)."""
    def schema(n: int) -> ranking.SchemaIndex:
        tables = [Table(name=f"t{i}", primary_key=["id"], columns=[Column(name="id"), Column(name=f"v{i}")])
                  for i in range(n)]
        return ranking.build_schema_index(SchemaSnapshot.create(DatasourceInfo(id=f"s{n}", dialect="sqlite"),
                                                                tables, CAPTURED))

    def context(n: int) -> tuple[float, np.ndarray]:
        index = schema(n)
        first = np.array([0.95, 0.3] + [0.005] * (n - 2))
        table_x = np.zeros((n, len(ranking.TABLE_FEATURES)))
        x = ranking.context_features(index, first, table_x)
        return float(ranking.CONTEXT_MODEL.prob(x)[1]), x[:, ranking.CONTEXT_FEATURES.index("log_tables")]

    small, size_small = context(2)
    large, size_large = context(20)
    assert small > large
    assert np.allclose(size_small, np.log(2)) and np.allclose(size_large, np.log(20))
    assert np.allclose(context(100)[1], np.log(ranking.CONTEXT_TABLES_CAP))
