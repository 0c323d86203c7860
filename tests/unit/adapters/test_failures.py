"""Driver failures become clear, password-free DatasourceUnavailableError messages."""

from __future__ import annotations

import doctest
import sqlite3

import pytest
import sqlalchemy as sa

from nl2sql_assets.adapters import failures
from nl2sql_assets.adapters.failures import describe_exception, secrets_of, unavailable
from nl2sql_assets.errors import DatasourceUnavailableError


def test_doctests() -> None:
    assert doctest.testmod(failures).failed == 0


@pytest.mark.parametrize(("message", "category"), [
    ('connection to server at "127.0.0.1", port 1 failed: Connection refused', "server unreachable"),
    ("(2003, \"Can't connect to MySQL server on '127.0.0.1' ([Errno 111] Connection refused)\")",
     "server unreachable"),
    ('FATAL:  password authentication failed for user "bob"', "authentication failed"),
    ("(1045, \"Access denied for user 'bob'@'localhost' (using password: YES)\")", "authentication failed"),
    ("(1044, \"Access denied for user 'bob'@'%' to database 'shop'\")", "permission denied"),
    ("permission denied for table orders", "permission denied"),
    ('FATAL:  database "shop" does not exist', "database not found"),
    ('IO Error: Could not set lock on file "x.duckdb": Conflicting lock is held', "file is locked"),
    ("something else entirely", "cannot read the database"),
])
def test_categories(message: str, category: str) -> None:
    assert describe_exception(RuntimeError(message), []).startswith(f"{category} (RuntimeError: ")


def test_passwords_are_removed_in_every_form() -> None:
    secrets = secrets_of("postgresql://bob:p%40ss@db/x")
    text = describe_exception(RuntimeError("bad p@ss and p%40ss in postgresql://bob:p%40ss@db/x"), secrets)
    assert "p@ss" not in text and "p%40ss" not in text and "***" in text


def test_sqlalchemy_wrapping_is_unwrapped_and_statement_dropped() -> None:
    engine = sa.create_engine("sqlite://")
    with engine.connect() as conn, pytest.raises(sa.exc.OperationalError) as info:
        conn.exec_driver_sql("SELECT * FROM nowhere_secret_table_hunter2")
    text = describe_exception(info.value, ["hunter2"])
    assert text.startswith("cannot read the database (OperationalError: no such table")
    assert "[SQL:" not in text and "hunter2" not in text and "Background" not in text


def test_unavailable_names_the_datasource() -> None:
    error = unavailable("shop", sqlite3.OperationalError("unable to open database file"), [], "cannot connect")
    assert isinstance(error, DatasourceUnavailableError)
    assert error.datasource_id == "shop"
    assert str(error) == ("datasource 'shop': cannot connect: cannot read the database "
                          "(OperationalError: unable to open database file)")


def test_long_messages_are_shortened() -> None:
    assert len(describe_exception(RuntimeError("x" * 5000), [])) < 400
