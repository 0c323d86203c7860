"""Person-like and place-like entities, with the real local model: the margins that point a proper
noun to the columns of people's names or of places."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from nl2sql_assets.errors import EmbeddingError
from nl2sql_assets.indexing.embeddings import EmbeddingService
from nl2sql_assets.retrieval.entity_kinds import PROTOTYPES, EntityKindScorer
from tests.chunk_samples import model_provider  # noqa: F401 - fixture

pytestmark = pytest.mark.slow

PEOPLE = ["Lewis Hamilton", "Eddie Irvine", "Ada Lovelace", "John Salvatier", "Sacha Harrison"]
PLACES = ["Illinois", "South Bohemia", "Alameda County", "Italy", "Lisbon"]
NEITHER = ["Australian Grand Prix", "Marvel Comics", "TR009", "Q1", "EUR"]


@pytest.fixture(scope="module")
def service(model_provider: object) -> EmbeddingService:  # noqa: F811
    return EmbeddingService(model_provider)  # type: ignore[arg-type]


def test_people_and_places_score_on_their_own_kind(service: EmbeddingService) -> None:
    scorer = EntityKindScorer(service.embed_queries)
    people, places, neither = (scorer.scores(service.embed_queries(names)) for names in (PEOPLE, PLACES, NEITHER))
    assert people.person.min() > max(places.person.max(), neither.person.max()), people.person
    assert places.place.min() > max(people.place.max(), neither.place.max()), places.place
    assert (people.person > 0.05).all() and (places.place > 0.05).all()
    for kinds in (people, places, neither):  # clipped: "not a person" is 0, never a penalty
        assert (kinds.person >= 0.0).all() and (kinds.place >= 0.0).all()


def test_descriptions_are_embedded_once_and_no_entity_costs_nothing(service: EmbeddingService) -> None:
    calls: list[list[str]] = []

    def embed(texts: Sequence[str]) -> np.ndarray:
        calls.append(list(texts))
        return service.embed_queries(texts)

    scorer = EntityKindScorer(embed)
    none = scorer.scores(np.zeros((0, 384), np.float32))
    assert none.person.shape == none.place.shape == (0,)
    assert calls == []
    vectors = service.embed_queries(["Lewis Hamilton", "Lisbon"])
    first, second = scorer.scores(vectors), scorer.scores(vectors)
    assert calls == [list(PROTOTYPES)]
    assert first.person.tolist() == second.person.tolist() and first.place.tolist() == second.place.tolist()


def test_a_provider_failure_leaves_the_kinds_at_zero_and_is_retried(service: EmbeddingService,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """The question's vectors can come from memory while the provider is down: the kinds are then
    0 with a warning, never an error, and the next question tries the descriptions again."""
    down = [True]

    def embed(texts: Sequence[str]) -> np.ndarray:
        if down[0]:
            raise EmbeddingError("provider unreachable (connection refused)")
        return service.embed_queries(texts)

    scorer = EntityKindScorer(embed)
    vectors = service.embed_queries(["Lewis Hamilton"])
    kinds = scorer.scores(vectors)
    assert kinds.person.tolist() == [0.0] and kinds.place.tolist() == [0.0]
    assert "entity kinds unavailable" in caplog.text and "connection refused" in caplog.text
    down[0] = False
    assert scorer.scores(vectors).person[0] > 0.05
