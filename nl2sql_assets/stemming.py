"""A light English stemmer for question words and identifier words: plurals only.

Retrieval and join inference share it: an inferred join matches ``movie_id`` to a ``movies``
table by the same singular a question's "movies" finds the ``movie`` table by. Every lexical
match, word meaning's vectors and the thesaurus lookups see the stems, so a plural must stem to
its singular exactly: "courses" that stemmed to ``cours`` missed the ``course`` table, "matches"
that stemmed to ``matche`` the ``match`` table and "movies" that stemmed to ``movy`` the
``movie`` table, and the stem was what word meaning embedded. Identifiers keep their shape
otherwise (no suffix but the plural's is touched).
"""

from __future__ import annotations

#: common English nouns ending in -ie, whose plural -ies is not that of a -y (WordNet 3.0's noun
#: lemmas ending in -ie, less names and slurs, with hoodie and selfie)
IE_NOUNS = frozenset("""
aerie auntie beanie birdie bogie bookie bootie bowtie brasserie brownie budgie caddie calorie
camaraderie charcuterie collie cookie coterie crosstie eyrie faerie foodie freebie genie goalie
groupie hankie hippie hoagie hoodie indie junkie kilocalorie laddie lassie lingerie magpie
menagerie movie necktie newbie nightie oldie patisserie pixie porkpie potpie prairie reverie
rookie roomie rotisserie selfie smoothie sortie specie sweetie talkie techie toughie townie
valkyrie veggie yuppie zombie
""".split())


def stem(word: str) -> str:
    """The singular of a plural, else the word itself.

    >>> [stem(w) for w in ("schools", "countries", "classes", "status", "axis", "courses")]
    ['school', 'country', 'class', 'status', 'axis', 'course']
    >>> [stem(w) for w in ("matches", "boxes", "statuses", "houses", "sizes", "movies")]
    ['match', 'box', 'status', 'house', 'size', 'movie']
    """
    if len(word) > 4 and word.endswith("ies"):
        return word[:-1] if word[:-1] in IE_NOUNS else word[:-3] + "y"
    if len(word) > 4 and word.endswith("sses"):
        return word[:-2]
    if len(word) > 3 and word.endswith("es"):
        # the plural -es of a sibilant: boxes, buzzes, matches, dishes; statuses and buses (a
        # consonant before -us), where houses and causes keep the e of house and cause
        if word.endswith(("xes", "zzes", "ches", "shes")) or (
                len(word) > 4 and word.endswith("uses") and word[-5] not in "aeiou"):
            return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word
