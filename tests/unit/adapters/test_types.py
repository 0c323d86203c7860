"""Declared types -> type families, across dialects' spellings."""

from __future__ import annotations

import doctest

import pytest

from nl2sql_assets.adapters import types
from nl2sql_assets.adapters.types import type_family


def test_doctests() -> None:
    assert doctest.testmod(types).failed == 0


@pytest.mark.parametrize(("declared", "family"), [
    # PostgreSQL format_type()
    ("integer", "integer"), ("bigint", "integer"), ("smallint", "integer"),
    ("character varying(120)", "text"), ("character(3)", "text"), ("text", "text"), ("citext", "text"),
    ("numeric(10,2)", "decimal"), ("double precision", "float"), ("real", "float"), ("money", "decimal"),
    ("boolean", "boolean"), ("date", "date"), ("timestamp without time zone", "datetime"),
    ("timestamp(6) with time zone", "datetime"), ("time with time zone", "time"), ("interval", "interval"),
    ("bytea", "binary"), ("json", "json"), ("jsonb", "json"), ("uuid", "uuid"), ("integer[]", "array"),
    ("character varying(20)[]", "array"), ("point", "other"), ("inet", "other"), ("tsvector", "other"),
    # MySQL / MariaDB COLUMN_TYPE
    ("int(11)", "integer"), ("bigint(20) unsigned", "integer"), ("tinyint(1)", "boolean"),
    ("tinyint(4)", "integer"), ("varchar(255)", "text"), ("longtext", "text"), ("enum('a','b')", "text"),
    ("decimal(10,2)", "decimal"), ("datetime(3)", "datetime"), ("year(4)", "integer"), ("blob", "binary"),
    ("VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "text"), ("bit(1)", "boolean"),
    # DuckDB data_type
    ("VARCHAR", "text"), ("HUGEINT", "integer"), ("UBIGINT", "integer"), ("DECIMAL(18,3)", "decimal"),
    ("TIMESTAMP WITH TIME ZONE", "datetime"), ("TIMESTAMP_NS", "datetime"), ("BLOB", "binary"),
    ("INTEGER[3]", "array"), ("STRUCT(a INTEGER, b VARCHAR)", "other"), ("MAP(VARCHAR, INTEGER)", "other"),
    # SQLite declared types (anything goes; affinity rules)
    ("", "other"), ("INT", "integer"), ("UNSIGNED BIG INT", "integer"), ("NVARCHAR(100)", "text"),
    ("CLOB", "text"), ("DOUBLE", "float"), ("FLOAT", "float"), ("NUMERIC", "decimal"),
    ("DATETIME", "datetime"), ("BOOLEAN", "boolean"), ("MEDIUMINT", "integer"), ("whatever", "other"),
    # SQL Server / Oracle
    ("NVARCHAR(MAX)", "text"), ("DATETIME2", "datetime"), ("UNIQUEIDENTIFIER", "uuid"), ("BIT", "boolean"),
    ("NUMBER(10,0)", "decimal"), ("VARCHAR2(30)", "text"), ("RAW(16)", "binary"),
])
def test_type_family(declared: str, family: str) -> None:
    assert type_family(declared) == family


def test_case_and_whitespace_do_not_matter() -> None:
    assert type_family("  Character  Varying ( 20 ) ") == type_family("CHARACTER VARYING(20)") == "text"
