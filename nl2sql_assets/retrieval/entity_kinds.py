"""Whether a question's proper noun names a person or a place.

A capitalized span can name a person ("Lewis Hamilton"), a place ("Fresno", "South Bohemia"), an
event ("Australian Grand Prix") or a thing. A person's name lives in a column like ``forename``,
``surname`` or ``DisplayName``, a place in one like ``City``, ``County`` or a column described as
the region. Neither the span nor such a column says so in words the other shares, and the dense
similarity of "Eddie Irvine" to the chunk of ``drivers.surname`` is a hair's breadth from that of
``circuits.circuitRef``. The embedding model does know what a person's name or a place looks
like: an entity's vector lies nearer to descriptions of its kind than to descriptions of others.

:class:`EntityKindScorer` gives, per kind, that margin: the nearest description of the kind minus
the nearest contrasting one (the other kind's first description and the neutral ones: events,
organisations, products, codes), clipped at 0. The descriptions were written once, not tuned: on
BIRD dev, people's names get person margins of about 0.1 to 0.24 and everything else 0 to 0.06;
"Illinois", "South Bohemia", "Alameda County" get place margins of 0.19 to 0.33, people, events
and codes 0.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from nl2sql_assets.errors import EmbeddingError

log = logging.getLogger(__name__)

PERSON_PROTOTYPES = ("a person's full name", "first name and last name", "name of a man or woman")
PLACE_PROTOTYPES = ("name of a place, city or country", "a region, district or state", "a town or city name")
NEUTRAL_PROTOTYPES = ("name of an event or competition", "name of a company or organization",
                      "a product or item name", "a code or identifier")
PROTOTYPES = (*PERSON_PROTOTYPES, *PLACE_PROTOTYPES, *NEUTRAL_PROTOTYPES)


@dataclass(frozen=True)
class EntityKinds:
    """Per entity, how much it looks like a person's name and like a place (each >= 0)."""

    person: np.ndarray
    place: np.ndarray

    @classmethod
    def none(cls) -> EntityKinds:
        return cls(np.zeros(0), np.zeros(0))


class EntityKindScorer:
    """Person and place margins of entity vectors.

    Args:
        embed: the embedding function the entity vectors come from (``embed_queries`` of the
            embedding service); the descriptions are embedded with it once, on first use.
    """

    def __init__(self, embed: Callable[[Sequence[str]], np.ndarray]) -> None:
        self._embed = embed
        self._vectors: np.ndarray | None = None
        self._lock = threading.Lock()

    def _prototypes(self) -> np.ndarray | None:
        with self._lock:
            if self._vectors is None:
                try:
                    self._vectors = np.asarray(self._embed(list(PROTOTYPES)), dtype=np.float32)
                except EmbeddingError as exc:
                    # the question's own vectors may have come from memory while the provider is
                    # down: answer without the kinds (tried again next time) rather than fail
                    log.warning("entity kinds unavailable this time: %s", exc)
                    return None
            return self._vectors

    def scores(self, vectors: np.ndarray) -> EntityKinds:
        """The margins of each row of ``vectors`` (unit-length entity vectors); 0 where the
        descriptions could not be embedded."""
        if not len(vectors):
            return EntityKinds.none()
        prototypes = self._prototypes()
        if prototypes is None:
            return EntityKinds(np.zeros(len(vectors)), np.zeros(len(vectors)))
        sims = vectors @ prototypes.T
        n_person, n_place = len(PERSON_PROTOTYPES), len(PLACE_PROTOTYPES)
        person, place, neutral = sims[:, :n_person], sims[:, n_person:n_person + n_place], sims[:, n_person + n_place:]
        person_margin = person.max(axis=1) - np.maximum(place[:, 0], neutral.max(axis=1))
        place_margin = place.max(axis=1) - np.maximum(person[:, 0], neutral.max(axis=1))
        return EntityKinds(np.maximum(person_margin, 0.0).astype(np.float64),
                           np.maximum(place_margin, 0.0).astype(np.float64))
