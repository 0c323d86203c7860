"""Declared column types -> a small set of type families, across dialects.

Every database spells its types differently (``character varying(20)``, ``VARCHAR(20)
COLLATE utf8mb4_bin``, ``int(11) unsigned``, ``TIMESTAMP WITH TIME ZONE``, ``INTEGER[]``).
Retrieval, statistics and chunks only need the family. Unknown names fall back to SQLite's
affinity rules (``INT`` -> integer, ``CHAR``/``CLOB``/``TEXT`` -> text, ...), and what is
left is ``other``.
"""

from __future__ import annotations

import re

from nl2sql_assets.schema.models import TypeFamily

_PARENS_RE = re.compile(r"\([^()]*\)")
_STOP_WORDS = {"collate", "character set", "charset", "not", "null", "default", "generated"}
_DROP_WORDS = {"unsigned", "signed", "zerofill", "identity", "auto_increment", "primary", "key"}

_EXACT: dict[str, TypeFamily] = {}


def _add(family: TypeFamily, *names: str) -> None:
    for name in names:
        _EXACT[name] = family


_add("integer", "int", "integer", "bigint", "smallint", "tinyint", "mediumint", "int1", "int2", "int4",
     "int8", "int16", "int32", "int64", "int128", "serial", "bigserial", "smallserial", "serial4",
     "serial8", "serial2", "hugeint", "uhugeint", "ubigint", "uinteger", "usmallint", "utinyint",
     "long", "short", "byteint", "signed", "integer identity", "oid", "varint", "year")
_add("float", "real", "float", "float4", "float8", "double", "double precision", "binary_float",
     "binary_double", "smallfloat")
_add("decimal", "numeric", "decimal", "dec", "number", "money", "smallmoney", "fixed", "bignum")
_add("text", "char", "character", "varchar", "character varying", "nchar", "nvarchar",
     "national character", "national character varying", "national char", "nvarchar2",
     "varchar2", "text", "tinytext", "mediumtext", "longtext", "ntext", "clob", "nclob", "string",
     "bpchar", "citext", "name", "enum", "set", "varying character", "native character",
     "char varying", "long varchar", "long nvarchar", "sysname", "str")
_add("boolean", "bool", "boolean", "logical", "bit")
_add("date", "date")
_add("datetime", "timestamp", "timestamptz", "datetime", "datetime2", "smalldatetime",
     "datetimeoffset", "timestamp with time zone", "timestamp without time zone",
     "timestamp_ns", "timestamp_ms", "timestamp_s", "timestamp_us", "timestamp with local time zone",
     "timestamp_tz")
_add("time", "time", "timetz", "time with time zone", "time without time zone")
_add("interval", "interval", "interval year to month", "interval day to second")
_add("binary", "blob", "bytea", "binary", "varbinary", "tinyblob", "mediumblob", "longblob",
     "image", "raw", "long raw", "bytes", "bit varying", "varbit", "bitstring")
_add("json", "json", "jsonb")
_add("uuid", "uuid", "uniqueidentifier", "guid")
_add("array", "array", "list")


def _base_words(declared: str) -> list[str]:
    text = declared.strip().lower().replace('"', "")
    while True:
        stripped = _PARENS_RE.sub(" ", text)
        if stripped == text:
            break
        text = stripped
    text = text.replace("character set", "charset")
    words: list[str] = []
    for word in text.split():
        if word in _STOP_WORDS:
            break
        if word not in _DROP_WORDS:
            words.append(word)
    return words


def type_family(declared: str | None) -> TypeFamily:
    """The family of a declared type, for any dialect's spelling.

    Args:
        declared: the type as the database reports it (may be empty in SQLite).

    Returns:
        One of the ``TypeFamily`` literals; ``other`` when nothing matches.

    >>> [type_family(t) for t in ("INTEGER", "int(11) unsigned", "BIGSERIAL", "UBIGINT")]
    ['integer', 'integer', 'integer', 'integer']
    >>> [type_family(t) for t in ("double precision", "REAL", "FLOAT8", "numeric(10,2)", "money")]
    ['float', 'float', 'float', 'decimal', 'decimal']
    >>> [type_family(t) for t in ("character varying(20)", "VARCHAR(50) COLLATE utf8mb4_bin", "enum('a','b')", "NVARCHAR(MAX)")]
    ['text', 'text', 'text', 'text']
    >>> [type_family(t) for t in ("tinyint(1)", "BOOLEAN", "bool", "TINYINT")]
    ['boolean', 'boolean', 'boolean', 'integer']
    >>> [type_family(t) for t in ("timestamp(3) with time zone", "DATETIME", "TIMESTAMP WITH TIME ZONE", "date", "time without time zone")]
    ['datetime', 'datetime', 'datetime', 'date', 'time']
    >>> [type_family(t) for t in ("INTERVAL", "bytea", "BLOB", "jsonb", "UUID", "uniqueidentifier")]
    ['interval', 'binary', 'binary', 'json', 'uuid', 'uuid']
    >>> [type_family(t) for t in ("integer[]", "TEXT[]", "INTEGER[3]", "_int4")]
    ['array', 'array', 'array', 'array']
    >>> [type_family(t) for t in ("", None, "point", "STRUCT(a INTEGER)", "inet", "mood")]
    ['other', 'other', 'other', 'other', 'other', 'other']
    >>> [type_family(t) for t in ("UNSIGNED BIG INT", "VARYING CHARACTER(255)", "NATIVE CHARACTER(70)", "CLOB", "DOUBLE")]
    ['integer', 'text', 'text', 'text', 'float']
    """
    if not declared or not declared.strip():
        return "other"
    raw = declared.strip().lower()
    if raw.endswith("]") or raw.startswith("array") or raw.startswith("list(") or (
            raw.startswith("_") and raw[1:] in _EXACT):
        return "array"
    if re.fullmatch(r"tinyint\s*\(\s*1\s*\)(\s+unsigned)?", raw) or re.fullmatch(r"bit\s*\(\s*1\s*\)", raw):
        return "boolean"
    words = _base_words(raw)
    for size in range(len(words), 0, -1):
        family = _EXACT.get(" ".join(words[:size]))
        if family is not None:
            return family
    return _affinity(" ".join(words) or raw)


def _affinity(name: str) -> TypeFamily:
    """SQLite-style affinity rules for names no table lists (``UNSIGNED BIG INT``, ``FOOINT``)."""
    if "interval" in name:
        return "interval"
    if "point" in name or "struct" in name or "map" in name or "union" in name:
        return "other"
    if "int" in name:
        return "integer"
    if "char" in name or "clob" in name or "text" in name or "string" in name:
        return "text"
    if "blob" in name or "binary" in name:
        return "binary"
    if "real" in name or "floa" in name or "doub" in name:
        return "float"
    if "bool" in name:
        return "boolean"
    if "json" in name:
        return "json"
    if "timestamp" in name or "datetime" in name:
        return "datetime"
    if "date" in name:
        return "date"
    if "time" in name:
        return "time"
    if "dec" in name or "numeric" in name:
        return "decimal"
    return "other"
