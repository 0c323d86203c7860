"""Passwords with URL delimiters, through the real command line, on real PostgreSQL and MariaDB.

A ``${VAR}`` password holding ``@ : / # % ?`` used to be pasted into the URL text before
parsing, so the URL split at the wrong ``@`` and the driver printed the "host": the rest of
the password. Masking then replaced short secrets inside ordinary words ("***ySQL"). Here:

- real users whose passwords hold every delimiter index through ``drift``, ``drift --json``
  and ``index`` (MariaDB checks the password; the test PostgreSQL trusts 127.0.0.1, so there
  the test proves the user, host, port and database reach the server intact);
- the same users on a wrong port, a wrong password, and a 1-character password: the output
  holds no fragment of any password, and "MySQL" stays "MySQL";
- ``SCHEMA_STORE_URL`` with a password in its userinfo or its query string, pointing at a
  server that does not answer.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml

from tests.conftest import MARIADB_URL, POSTGRES_URL, require_server

pytestmark = pytest.mark.server

SCRIPT = Path(sys.executable).parent / "nl2sql-assets"
PASSWORD = "Zq7@Wx:9/Kp#3%40Vt?Lm"  # every URL delimiter, and a "%40" that must stay literal
WRONG_PASSWORD = "Hy8@Rb:4/Qs#6%Uj?Nw"
SHORT_PASSWORD = "M"


def fragments(password: str) -> set[str]:
    """What must never show: every 4-character window and every run of 2+ letters or digits."""
    windows = {password[i:i + 4] for i in range(len(password) - 3)}
    return windows | {piece for piece in re.split(r"[^A-Za-z0-9]", password) if len(piece) >= 2}


def assert_no_fragment(text: str, *passwords: str) -> None:
    for password in passwords:
        leaked = sorted(f for f in fragments(password) if f in text)
        assert not leaked, f"fragments {leaked} of a password in:\n{text}"


def cli(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=timeout)


def _files_containing(root: Path, needle: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


@pytest.fixture
def pg_user() -> Iterator[dict[str, str]]:
    """A PostgreSQL role with PASSWORD and a fresh schema of two tables it may read."""
    require_server(POSTGRES_URL, "PostgreSQL")
    name = f"nl2sql_u_{uuid.uuid4().hex[:8]}"
    schema = f"s_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(POSTGRES_URL)
    with engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE ROLE "{name}" LOGIN PASSWORD %(pw)s', {"pw": PASSWORD})
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
        conn.exec_driver_sql(f'CREATE TABLE "{schema}".accounts (account_id INT PRIMARY KEY, owner TEXT)')
        conn.exec_driver_sql(f'CREATE TABLE "{schema}".ledger (entry_id INT PRIMARY KEY, account_id INT '
                             f'REFERENCES "{schema}".accounts(account_id), amount NUMERIC)')
        conn.exec_driver_sql(f'GRANT USAGE ON SCHEMA "{schema}" TO "{name}"')
        conn.exec_driver_sql(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{name}"')
    url = sa.make_url(POSTGRES_URL)
    try:
        yield {"user": name, "schema": schema, "host": str(url.host), "port": str(url.port or 5432),
               "database": str(url.database)}
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.exec_driver_sql(f'DROP ROLE IF EXISTS "{name}"')
        engine.dispose()


@pytest.fixture
def maria_user() -> Iterator[dict[str, str]]:
    """A MariaDB user with PASSWORD, one with SHORT_PASSWORD, and a fresh database they may read."""
    require_server(MARIADB_URL, "MariaDB")
    name, short = f"u_{uuid.uuid4().hex[:8]}", f"s_{uuid.uuid4().hex[:8]}"
    database = f"t_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(MARIADB_URL)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE `{database}`")
        conn.exec_driver_sql(f"CREATE TABLE `{database}`.customers (customer_id INT PRIMARY KEY, name TEXT)")
        conn.exec_driver_sql(f"CREATE TABLE `{database}`.orders (order_id INT PRIMARY KEY, customer_id INT, "
                             f"FOREIGN KEY (customer_id) REFERENCES `{database}`.customers(customer_id))")
        for user, password in ((name, PASSWORD), (short, SHORT_PASSWORD)):
            conn.exec_driver_sql(f"CREATE USER '{user}'@'%%' IDENTIFIED BY %(pw)s", {"pw": password})
            conn.exec_driver_sql(f"GRANT SELECT ON `{database}`.* TO '{user}'@'%%'")
    url = sa.make_url(MARIADB_URL)
    try:
        yield {"user": name, "short_user": short, "database": database, "host": str(url.host),
               "port": str(url.port or 3306)}
    finally:
        with engine.begin() as conn:
            for user in (name, short):
                conn.exec_driver_sql(f"DROP USER IF EXISTS '{user}'@'%%'")
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{database}`")
        engine.dispose()


def _env(home: Path, entries: list[dict[str, object]], **variables: str) -> dict[str, str]:
    path = home / "datasources.yaml"
    path.write_text(yaml.safe_dump({"datasources": entries}, sort_keys=False), encoding="utf-8")
    return {**os.environ, "NL2SQL_HOME": str(home), "NL2SQL_DATASOURCES": str(path), **variables}


@pytest.mark.slow
def test_passwords_with_url_delimiters_reach_the_server_and_index(
        nl2sql_home: Path, pg_user: dict[str, str], maria_user: dict[str, str]) -> None:
    pg, my = pg_user, maria_user
    env = _env(nl2sql_home, [
        {"id": "ledger", "schemas": [pg["schema"]],
         "url": f"postgresql+psycopg2://{pg['user']}:${{PG_PW}}@{pg['host']}:{pg['port']}/{pg['database']}"},
        {"id": "shop", "url": f"mysql+pymysql://{my['user']}:${{MY_PW}}@{my['host']}:{my['port']}/{my['database']}"},
    ], PG_PW=PASSWORD, MY_PW=PASSWORD)

    drift = cli("drift", env=env)
    assert drift.returncode == 0, drift.stderr
    lines = drift.stdout.splitlines()
    assert lines[0].startswith("ledger: new (would be ") and lines[1].startswith("shop: new (would be "), drift.stdout
    assert_no_fragment(drift.stdout + drift.stderr, PASSWORD)

    as_json = cli("drift", "--json", env=env)
    assert as_json.returncode == 0, as_json.stderr
    results = {r["datasource_id"]: r for r in json.loads(as_json.stdout)}
    assert {k: (r["status"], r["table_count"], r["error"]) for k, r in results.items()} == {
        "ledger": ("new", 2, None), "shop": ("new", 2, None)}
    assert_no_fragment(as_json.stdout + as_json.stderr, PASSWORD)

    index = cli("index", env=env)
    assert index.returncode == 0, index.stdout + index.stderr
    assert "ledger: new version " in index.stdout and "shop: new version " in index.stdout
    assert_no_fragment(index.stdout + index.stderr, PASSWORD)
    assert _files_containing(nl2sql_home, PASSWORD) == []
    assert cli("drift", env=env).stdout.count(": unchanged (") == 2


@pytest.mark.slow
def test_failures_with_such_passwords_print_no_fragment_and_no_garbled_word(
        nl2sql_home: Path, pg_user: dict[str, str], maria_user: dict[str, str]) -> None:
    pg, my = pg_user, maria_user
    env = _env(nl2sql_home, [
        {"id": "pg_port", "schemas": [pg["schema"]],
         "url": f"postgresql+psycopg2://{pg['user']}:${{PG_PW}}@{pg['host']}:1/{pg['database']}"},
        {"id": "maria_port", "url": f"mysql+pymysql://{my['user']}:${{MY_PW}}@{my['host']}:1/{my['database']}"},
        {"id": "maria_host", "url": f"mysql+pymysql://{my['user']}:${{MY_PW}}@nl2sql-nosuchhost.invalid:"
                                    f"{my['port']}/{my['database']}"},
        {"id": "maria_wrong", "url": f"mysql+pymysql://{my['user']}:${{WRONG_PW}}@{my['host']}:{my['port']}/"
                                     f"{my['database']}"},
        {"id": "maria_short", "url": f"mysql+pymysql://{my['short_user']}:${{SHORT_PW}}@{my['host']}:1/"
                                     f"{my['database']}"},
    ], PG_PW=PASSWORD, MY_PW=PASSWORD, WRONG_PW=WRONG_PASSWORD, SHORT_PW=SHORT_PASSWORD)

    drift = cli("drift", env=env)
    assert drift.returncode == 0, drift.stderr
    lines = dict(line.split(": ", 1) for line in drift.stdout.splitlines())
    assert lines["pg_port"].startswith("failed: cannot connect: server unreachable (")
    assert lines["maria_port"].startswith("failed: cannot connect: server unreachable (")
    assert lines["maria_host"].startswith("failed: cannot connect: server unreachable (")
    assert "nl2sql-nosuchhost.invalid" in lines["maria_host"]  # the real host, not a piece of the password
    assert lines["maria_wrong"].startswith("failed: cannot connect: authentication failed (")
    assert "Can't connect to MySQL server on" in lines["maria_short"], lines["maria_short"]
    assert "***" not in lines["maria_short"]  # nothing to mask: "MySQL" is not the password "M"
    assert_no_fragment(drift.stdout + drift.stderr, PASSWORD, WRONG_PASSWORD)

    as_json = cli("drift", "--json", env=env)
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert [r["status"] for r in data] == ["failed"] * 5 and all(r["error"] for r in data)
    assert "Can't connect to MySQL server" in data[-1]["error"]
    assert_no_fragment(as_json.stdout + as_json.stderr, PASSWORD, WRONG_PASSWORD)

    index = cli("index", env=env)
    assert index.returncode == 1, index.stdout + index.stderr
    assert index.stdout.count(": failed") == 5
    assert "nl2sql-assets index: failed: pg_port, maria_port, maria_host, maria_wrong, maria_short" in index.stderr
    assert "Can't connect to MySQL server" in index.stdout
    assert_no_fragment(index.stdout + index.stderr, PASSWORD, WRONG_PASSWORD)


STORE_CASES = {
    # (SCHEMA_STORE_URL, the secrets it holds)
    "postgres userinfo": ("postgresql+psycopg2://bob:Zq7%40Wx%3A9%2FKp%23@127.0.0.1:1/db", ["Zq7@Wx:9/Kp#"]),
    "postgres query": ("postgresql+psycopg2://bob@127.0.0.1:1/db?password=QuerySecret99", ["QuerySecret99"]),
    "postgres raw @": ("postgresql+psycopg2://bob:Zq7@Wx:9abc@127.0.0.1:1/db", ["Zq7@Wx:9abc"]),
    "mariadb query": ("mysql+pymysql://bob:Hy8%40Rb@127.0.0.1:1/db?passwd=QuerySecret77&charset=utf8mb4",
                      ["Hy8@Rb", "QuerySecret77"]),
}


def test_schema_store_url_credentials_never_print(nl2sql_home: Path, sqlite_url: str) -> None:
    """Every case in one test: the userinfo case alone was already masked before the fix."""
    engine = sa.create_engine(sqlite_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE notes (note_id INTEGER PRIMARY KEY)")
    engine.dispose()
    for case, (store_url, secrets) in STORE_CASES.items():
        env = _env(nl2sql_home, [{"id": "notes", "url": sqlite_url}], SCHEMA_STORE_URL=store_url)
        for command in (["drift"], ["drift", "--json"], ["index"]):
            proc = cli(*command, env=env, timeout=300)
            text = proc.stdout + proc.stderr
            assert proc.returncode != 0 or command[0] == "drift", (case, command, text)
            assert "schema store " in text, (case, command, text)
            assert "Traceback" not in text, (case, command, text)
            assert_no_fragment(text, *secrets)


def test_password_in_a_datasource_query_string_never_prints(nl2sql_home: Path) -> None:
    """``?password=`` written in the datasources file, or filled from ``${VAR}``."""
    secret = "QueryPw-71f3-secret"
    env = _env(nl2sql_home, [
        {"id": "crm", "url": "postgresql+psycopg2://bob@127.0.0.1:notaport/crm?password=" + secret},
    ])
    drift = cli("drift", env=env)
    assert drift.returncode == 2 and drift.stdout == "", drift.stdout + drift.stderr
    assert "malformed URL 'postgresql+psycopg2://bob@127.0.0.1:notaport/crm?password=***'" in drift.stderr
    assert_no_fragment(drift.stderr, secret)

    env = _env(nl2sql_home, [
        {"id": "crm", "url": "postgresql+psycopg2://bob@127.0.0.1:1/crm?sslmode=disable&password=${CRM_PW}"},
    ], CRM_PW=secret)
    for command in (["drift"], ["drift", "--json"], ["index"]):
        proc = cli(*command, env=env, timeout=300)
        assert proc.returncode == (1 if command == ["index"] else 0), proc.stdout + proc.stderr
        assert "server unreachable" in proc.stdout
        assert_no_fragment(proc.stdout + proc.stderr, secret)
