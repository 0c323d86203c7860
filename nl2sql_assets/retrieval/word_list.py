"""What word meaning asks of a thesaurus: a word's related words, looked up once and kept.

The Moby thesaurus (:mod:`~nl2sql_assets.retrieval.thesaurus`) and WordNet
(:mod:`~nl2sql_assets.retrieval.wordnet`) read their files differently but are asked the same
question for the same few thousand words over and over, from several threads.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import Protocol

#: looked-up words whose related sets are kept in memory per list (about 100 words each, some over 1,000)
ENTRY_CACHE_SIZE = 5_000


class WordList(Protocol):
    """Anything that lists a word's related words (stemmed single words)."""

    def related(self, word: str) -> frozenset[str]: ...

    def __len__(self) -> int: ...


class CachedWordList(ABC):
    """A word list whose lookups are kept in an LRU of :data:`ENTRY_CACHE_SIZE` words."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, frozenset[str]] = OrderedDict()

    @abstractmethod
    def _lookup(self, word: str) -> set[str]:
        """The words the list relates to ``word``, read from its files."""

    def related(self, word: str) -> frozenset[str]:
        """The words the list relates to ``word`` (never ``word`` itself; empty when it has none)."""
        with self._lock:
            hit = self._entries.get(word)
            if hit is not None:
                self._entries.move_to_end(word)
                return hit
        found = self._lookup(word)
        found.discard(word)
        entry = frozenset(found)
        with self._lock:
            self._entries[word] = entry
            while len(self._entries) > ENTRY_CACHE_SIZE:
                self._entries.popitem(last=False)
        return entry
