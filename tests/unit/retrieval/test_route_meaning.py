"""Routing candidates by meaning: every datasource's name words pooled, a question's words against them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nl2sql_assets.indexing.embeddings import EmbeddingService
from nl2sql_assets.retrieval.lexical import build_query_terms
from nl2sql_assets.retrieval.route_meaning import MeaningIndex, best_by_meaning
from nl2sql_assets.retrieval.thesaurus import Thesaurus
from nl2sql_assets.retrieval.word_similarity import THESAURUS_STRENGTH, question_words
from tests.chunk_samples import model_provider  # noqa: F401 - fixture


def _index(words: dict[str, list[str]],
           thesaurus: Thesaurus | None = None) -> tuple[MeaningIndex, dict[str, np.ndarray]]:
    """An index whose words are orthogonal unit vectors: only the same word (or a listed pair) relates."""
    vocab = sorted({w for ws in words.values() for w in ws} | {"vocalist", "weather"})
    basis = {w: row for w, row in zip(vocab, np.eye(len(vocab), dtype=np.float32), strict=True)}
    parts = [(ds, ws, np.vstack([basis[w] for w in ws])) for ds, ws in words.items()]
    return MeaningIndex.build(parts, thesaurus), basis


def test_a_datasource_scores_the_share_of_the_question_its_names_mean() -> None:
    index, basis = _index({"music": ["singer", "concert", "name"], "farm": ["tractor", "field", "name"],
                           "garage": ["mechanic", "name"]})
    assert index.datasources == ("music", "farm", "garage")
    assert len(index.tokens) == 6  # "name" once, paired with all three
    shares = dict(zip(index.datasources, index.scores(np.vstack([basis["singer"], basis["concert"]]),
                                                      ["singer", "concert"]).tolist(), strict=True))
    assert shares["music"] == pytest.approx(1.0) and shares["farm"] == shares["garage"] == 0.0
    # a word every datasource holds says little: "name" weighs less than "tractor"
    mixed = index.scores(np.vstack([basis["tractor"], basis["name"]]), ["tractor", "name"])
    by = dict(zip(index.datasources, mixed.tolist(), strict=True))
    assert by["farm"] > 0.5 > by["music"] == by["garage"] > 0.0
    assert best_by_meaning(by, {"farm"}, 1) == ["garage"]  # a tie goes by name
    assert best_by_meaning(by, set(), 1) == ["farm"]
    # no question words, no datasource: nothing scores
    assert not index.scores(np.zeros((0, len(basis)), dtype=np.float32), []).any()
    assert MeaningIndex.build([]).scores(basis["singer"][None, :], ["singer"]).shape == (0,)


def test_a_thesaurus_pair_counts_at_least_its_strength_either_way(tmp_path: Path) -> None:
    path = tmp_path / "words.txt"
    path.write_bytes(b"singer,vocalist,crooner\r\nwarbler,concert\r\n")
    index, basis = _index({"music": ["singer", "concert"], "farm": ["tractor", "field"]}, Thesaurus(path))
    # "vocalist" is listed under singer (the schema word's entry); "warbler" lists concert (the question word's)
    for word in ("vocalist", "warbler"):
        vector = basis["vocalist"] if word == "vocalist" else basis["weather"]  # orthogonal to every name word
        shares = index.scores(vector[None, :], [word])
        assert shares[0] == pytest.approx(THESAURUS_STRENGTH) and shares[1] == 0.0, word
    unlisted = index.scores(basis["weather"][None, :], ["weather"])
    assert not unlisted.any()


def test_routing_adds_the_datasources_whose_names_mean_the_question(tmp_path: Path) -> None:
    from nl2sql_assets.retrieval.models import RetrievalRequest, RetrieverConfig
    from nl2sql_assets.retrieval.routing import ROUTE_FEATURES
    from tests.fakes import HashEmbedder
    from tests.retrieval_samples import World, generated_snapshot

    world = World(tmp_path / "world", HashEmbedder(64))
    try:
        for i, (ds, entities) in enumerate([("shop", ("customer", "order", "product")),
                                            ("clinic", ("patient", "doctor", "appointment")),
                                            ("garage", ("mechanic", "vehicle")),
                                            ("farm", ("field", "tractor"))], start=1):
            world.add(generated_snapshot(i, datasource_id=ds, tenant="acme", entities=entities))
        question = [RetrievalRequest(question="which mechanic repaired the vehicle of each customer", tenant="acme")]
        plain = RetrieverConfig(route_lexical_candidates=0, route_meaning_candidates=0)
        [dense_only] = world.retriever(plain).route_candidates(question, count=1)
        meaning = RetrieverConfig(route_lexical_candidates=0, route_meaning_candidates=2)
        retriever = world.retriever(meaning)
        [both] = retriever.route_candidates(question, count=1)
        assert both.names[0] == dense_only.names[0] and len(both.names) == 3
        assert "garage" in both.names and "farm" not in both.names  # farm's names mean none of it
        assert set(both.names) | set(both.rest) == {"shop", "clinic", "garage", "farm"}
        share = dict(zip(both.names, both.features[:, ROUTE_FEATURES.index("meaning_share")].tolist(), strict=True))
        assert share["garage"] > 0.0
        # the pooled words are kept per tenant and read again once a live version changes
        key, index = retriever._router._meanings["acme"]
        assert {ds for ds, _ in key} == {"shop", "clinic", "garage", "farm"} and "mechanic" in index.tokens
        world.add(generated_snapshot(9, datasource_id="bakery", tenant="acme", entities=("baker", "loaf")))
        fresh = world.retriever(meaning.model_copy(update={"live_version_ttl_s": 0}))
        [baked] = fresh.route_candidates([RetrievalRequest(question="which baker baked the loaf", tenant="acme")],
                                         count=1)
        assert "bakery" in baked.names
    finally:
        world.close()


@pytest.mark.slow
def test_the_local_model_routes_a_synonym_to_the_datasource_it_means(model_provider: object) -> None:  # noqa: F811
    """The premise, on the shipped model: "vocalists" and "arena" mean the music datasource's names."""
    service = EmbeddingService(model_provider)  # type: ignore[arg-type]
    schemas = {"music": ["singer", "concert", "stadium", "name", "country"],
               "farm": ["tractor", "field", "crop", "name", "harvest"],
               "school": ["student", "teacher", "course", "name", "grade"]}
    index = MeaningIndex.build([(ds, ws, service.embed_documents(ws).vectors) for ds, ws in schemas.items()])
    for question, expected in [("How many vocalists performed in each arena?", "music"),
                               ("Which pupils have the best marks?", "school"),
                               ("What did each combine reap this autumn?", "farm")]:
        qw = question_words(build_query_terms(question))
        shares = dict(zip(index.datasources, index.scores(service.embed_queries(qw), qw).tolist(), strict=True))
        assert max(shares, key=shares.__getitem__) == expected, (question, shares)


def test_routing_embeds_each_datasources_name_words_once_and_none_without_word_meaning(tmp_path: Path) -> None:
    from nl2sql_assets.retrieval.models import RetrievalRequest, RetrieverConfig
    from nl2sql_assets.retrieval.routing import ROUTE_FEATURES
    from tests.fakes import HashEmbedder
    from tests.retrieval_samples import World, generated_snapshot

    world = World(tmp_path / "world", HashEmbedder(64))
    try:
        for i, (ds, entities) in enumerate([("shop", ("customer", "order", "product")),
                                            ("garage", ("mechanic", "vehicle")),
                                            ("farm", ("field", "tractor"))], start=1):
            world.add(generated_snapshot(i, datasource_id=ds, entities=entities))
        calls: list[list[str]] = []
        embed = world.embeddings.embed_documents

        def counting(texts):  # type: ignore[no-untyped-def]
            calls.append(list(texts))
            return embed(texts)

        world.embeddings.embed_documents = counting  # type: ignore[method-assign]
        # one candidate scored in full (its whole vocabulary embedded for word meaning); the other
        # datasources only pooled for the meaning share
        config = RetrieverConfig(route_candidates=1, route_lexical_candidates=0, route_meaning_candidates=0)
        retriever = world.retriever(config)
        asked = [RetrievalRequest(question="which mechanic repaired the vehicle"),
                 RetrievalRequest(question="which mechanic repaired the tractor")]
        [first] = retriever.route_candidates(asked[:1], count=1)
        [second] = retriever.route_candidates(asked[1:], count=1)
        scored = set(first.names) | set(second.names)
        pooled = {"shop", "garage", "farm"} - scored
        assert pooled
        words = {ds: retriever._schemas.resolve(ds, None, None).index.words for ds in ("shop", "garage", "farm")}
        embedded = [w for call in calls for w in call]
        for ds in pooled:  # its name words once for both questions, none of its descriptions' words
            names = set(words[ds].tokens[:words[ds].n_named])
            described = set(words[ds].tokens[words[ds].n_named:])
            assert described and not described & set(embedded) - {w for d in scored for w in words[d].tokens}
            assert list(words[ds].tokens[:words[ds].n_named]) in calls and names <= set(embedded)
        # nothing again for the second question: a scored datasource's name words were pooled, then its
        # whole vocabulary embedded for its word features (the embedding cache answers the repeat)
        assert len(calls) == len(pooled) + 2 * len(scored)
        calls.clear()
        off = world.retriever(RetrieverConfig(route_candidates=1, word_meaning=False))
        [found] = off.route_candidates(asked[:1], count=1)
        assert found.names
        assert calls == [] and not found.features[:, ROUTE_FEATURES.index("meaning_share")].any()
    finally:
        world.close()
