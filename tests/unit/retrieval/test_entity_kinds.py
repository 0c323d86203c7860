"""Person-like entities, with the real local model: the margin that points a proper noun to the
columns of people's names."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from nl2sql_assets.indexing.embeddings import EmbeddingService
from nl2sql_assets.retrieval.entity_kinds import OTHER_PROTOTYPES, PERSON_PROTOTYPES, PersonScorer
from tests.chunk_samples import model_provider  # noqa: F401 - fixture

pytestmark = pytest.mark.slow

PEOPLE = ["Lewis Hamilton", "Eddie Irvine", "Ada Lovelace", "John Salvatier", "Sacha Harrison"]
NOT_PEOPLE = ["Australian Grand Prix", "San Marino", "Alameda County", "Marvel Comics", "TR009", "Q1", "EUR"]


def test_people_score_above_places_events_and_codes(model_provider: object) -> None:  # noqa: F811
    service = EmbeddingService(model_provider)  # type: ignore[arg-type]
    scorer = PersonScorer(service.embed_queries)
    people = scorer.scores(service.embed_queries(PEOPLE))
    others = scorer.scores(service.embed_queries(NOT_PEOPLE))
    assert people.min() > others.max(), (dict(zip(PEOPLE, people)), dict(zip(NOT_PEOPLE, others)))
    assert (people > 0.05).all()
    assert (others >= 0.0).all()  # clipped: "not a person" is 0, never a penalty


def test_prototypes_are_embedded_once_and_no_entity_costs_nothing(model_provider: object) -> None:  # noqa: F811
    service = EmbeddingService(model_provider)  # type: ignore[arg-type]
    calls: list[list[str]] = []

    def embed(texts: Sequence[str]) -> np.ndarray:
        calls.append(list(texts))
        return service.embed_queries(texts)

    scorer = PersonScorer(embed)
    assert scorer.scores(np.zeros((0, 384), np.float32)).shape == (0,)
    assert calls == []
    vectors = service.embed_queries(["Lewis Hamilton"])
    first = scorer.scores(vectors)
    second = scorer.scores(vectors)
    assert calls == [[*PERSON_PROTOTYPES, *OTHER_PROTOTYPES]]
    assert first.tolist() == second.tolist()
