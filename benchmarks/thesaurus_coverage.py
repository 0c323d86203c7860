"""How often each installed word list links the schema words Spider's synonym rewrite replaced.

Usage::

    python benchmarks/thesaurus_coverage.py [--dataset ../shared/bench/spider-train]

Each synonym-worded question is paired with its original wording (the same gold query). A schema
word of the gold tables' and columns' names that the original says and the rewrite does not is a
replaced word; it is covered when a list relates it, either way, to a word the rewrite brought in.
``false_links_per_question``: per rewritten question, the pairs of a question word its schema does
not use and a schema word that was not replaced which the list relates (links that can only mislead).
Entries longer than word meaning's cap count as empty, as in the retriever. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from nl2sql_assets.retrieval.lexical import words
from nl2sql_assets.retrieval.thesaurus import Thesaurus, default_thesaurus
from nl2sql_assets.retrieval.word_list import WordList
from nl2sql_assets.retrieval.word_similarity import synonym_entry
from nl2sql_assets.retrieval.wordnet import WordNet


def lists() -> dict[str, WordList]:
    """The word lists the retriever joins, by name (a missing package is left out, logged)."""
    joined = default_thesaurus()
    names = {Thesaurus: "moby", WordNet: "wordnet"}
    return {names[type(source)]: source for source in (joined.sources if joined is not None else ())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "bench" / "spider-train")
    args = parser.parse_args(argv)
    questions = [json.loads(line) for line in (args.dataset / "questions.jsonl").open(encoding="utf-8")]
    schemas = json.loads((args.dataset / "schemas.json").read_text(encoding="utf-8"))
    schema_words = {db: {w for t in s["tables"] for name in [t["name"], *(c["name"] for c in t["columns"])]
                         for w in words(name, drop_stopwords=False)} for db, s in schemas.items()}
    original = {q["id"].rsplit("_", 1)[1]: q for q in questions if q["wording"] == "original"}
    rewritten = [q for q in questions if q["wording"] == "synonyms" and q["id"].rsplit("_", 1)[1] in original]
    sources = lists()

    def relates(name: str, a: str, b: str) -> bool:
        if name == "joined":
            return any(relates(n, a, b) for n in sources)
        return b in synonym_entry(sources[name], a) or a in synonym_entry(sources[name], b)

    names = [*sources, "joined"] if len(sources) > 1 else list(sources)
    covered = dict.fromkeys(names, 0)
    false_links = dict.fromkeys(names, 0)
    replaced_total = 0
    for q in rewritten:
        o = original[q["id"].rsplit("_", 1)[1]]
        said, says = set(words(o["question"])), set(words(q["question"]))
        gold = {w for t in o["gold_tables"] for w in words(t, drop_stopwords=False)}
        gold |= {w for c in o["gold_columns"] for w in words(c.split(".", 1)[1], drop_stopwords=False)}
        replaced, brought = (said - says) & gold, says - said
        replaced_total += len(replaced)
        schema = schema_words[q["db_id"]]
        for name in names:
            covered[name] += sum(any(relates(name, new, old) for new in brought) for old in replaced)
            false_links[name] += sum(relates(name, w, s) for w in says - schema for s in schema - replaced)
    print(json.dumps({"rewritten_questions": len(rewritten), "replaced_words": replaced_total,
                      "covered": {n: round(covered[n] / max(1, replaced_total), 4) for n in names},
                      "false_links_per_question": {n: round(false_links[n] / max(1, len(rewritten)), 3) for n in names}},
                     indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
