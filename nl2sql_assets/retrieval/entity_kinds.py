"""Whether a question's proper noun names a person.

A capitalized span can name a person ("Lewis Hamilton"), a place ("San Marino"), an event
("Australian Grand Prix") or a thing, and a person's name lives in a column like ``forename``,
``surname`` or ``DisplayName``. Neither the span nor such a column says so in words the other
shares, and the dense similarity of "Eddie Irvine" to the chunk of ``drivers.surname`` is a
hair's breadth from that of ``circuits.circuitRef``. The embedding model does know what a
person's name looks like: an entity's vector lies nearer to descriptions of personal names than
to descriptions of places, events, organisations, products or codes when it names a person.

:class:`PersonScorer` gives that margin (nearest person prototype minus nearest other prototype,
clipped at 0). The prototypes were written once, not tuned: on BIRD dev, people's names get
margins of about 0.1 to 0.24, and places, events, nationalities and codes 0 to 0.06.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np

PERSON_PROTOTYPES = ("a person's full name", "first name and last name", "name of a man or woman")
OTHER_PROTOTYPES = ("name of a place, city or country", "name of an event or competition",
                    "name of a company or organization", "a product or item name", "a code or identifier")


class PersonScorer:
    """How much each entity vector looks like a person's name (0 when it does not).

    Args:
        embed: the embedding function the entity vectors come from (``embed_queries`` of the
            embedding service); the prototypes are embedded with it once, on first use.
    """

    def __init__(self, embed: Callable[[Sequence[str]], np.ndarray]) -> None:
        self._embed = embed
        self._prototypes: tuple[np.ndarray, np.ndarray] | None = None
        self._lock = threading.Lock()

    def _vectors(self) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            if self._prototypes is None:
                vectors = np.asarray(self._embed([*PERSON_PROTOTYPES, *OTHER_PROTOTYPES]), dtype=np.float32)
                self._prototypes = (vectors[:len(PERSON_PROTOTYPES)], vectors[len(PERSON_PROTOTYPES):])
            return self._prototypes

    def scores(self, vectors: np.ndarray) -> np.ndarray:
        """Per entity vector (rows of ``vectors``, unit length), the person margin, >= 0."""
        if not len(vectors):
            return np.zeros(0, dtype=np.float64)
        person, other = self._vectors()
        margin = (vectors @ person.T).max(axis=1) - (vectors @ other.T).max(axis=1)
        return np.maximum(margin, 0.0).astype(np.float64)
