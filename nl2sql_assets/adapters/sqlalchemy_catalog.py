"""Reading a SQLAlchemy datasource's catalog into :class:`~nl2sql_assets.adapters.structure.RawTable` records.

Structure is read in bulk. The generic path uses SQLAlchemy's multi-table reflection
(``Inspector.get_multi_columns``, ``get_multi_pk_constraint``, ``get_multi_foreign_keys``,
``get_multi_unique_constraints``, ``get_multi_table_comment``) once per schema. SQLite,
PostgreSQL and MySQL/MariaDB have a faster dialect path with the same result shape: SQLite joins
``sqlite_master`` with ``pragma_table_xinfo``/``pragma_foreign_key_list``/``pragma_index_list``
(three queries for the whole file), PostgreSQL reads ``pg_catalog`` in three queries,
MySQL/MariaDB ``information_schema`` in three.

Schema names (see :mod:`nl2sql_assets.adapters.base`): SQLite tables have ``schema_name=None``;
MySQL/MariaDB tables of the URL's database have ``None`` (other databases listed in
``schemas`` keep their name); PostgreSQL and every other dialect keep the real schema name.
By default every non-system schema is indexed (PostgreSQL: not ``pg_catalog``,
``information_schema``, ``pg_toast*``, ``pg_temp*``; schemas the role may not use are skipped
with a warning); ``schemas`` in the config restricts it, and a listed schema that is missing
or not usable is an error.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.engine.reflection import ObjectKind, ObjectScope

from nl2sql_assets.adapters.failures import describe_exception
from nl2sql_assets.adapters.structure import RawColumn, RawForeignKey, RawTable
from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.errors import DatasourceError, DatasourceUnavailableError

SYSTEM_SCHEMAS = frozenset({
    "information_schema", "pg_catalog", "performance_schema", "mysql", "sys", "INFORMATION_SCHEMA",
    "guest", "db_owner", "db_accessadmin", "db_securityadmin", "db_ddladmin", "db_backupoperator",
    "db_datareader", "db_datawriter", "db_denydatareader", "db_denydatawriter",
})
_SINGLE_SCHEMA_DIALECTS = {"sqlite", "mysql", "mariadb"}
_PG_RELKINDS = ("r", "p", "v", "m", "f")


# --------------------------------------------------------------------------------------------
# SQLite: three catalog queries for the whole file
# --------------------------------------------------------------------------------------------
_SQLITE_USER_OBJECTS = "m.type IN ('table', 'view') AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
_SQLITE_TABLES = f"SELECT m.name, m.type FROM sqlite_master AS m WHERE {_SQLITE_USER_OBJECTS}"
_SQLITE_COLUMNS = (
    "SELECT m.name, p.cid, p.name, p.type, p.\"notnull\", p.dflt_value, p.pk, p.hidden "
    "FROM sqlite_master AS m JOIN pragma_table_xinfo(m.name) AS p "
    f"WHERE {_SQLITE_USER_OBJECTS} ORDER BY m.name, p.cid"
)
_SQLITE_COLUMNS_ONE = (
    "SELECT ?, p.cid, p.name, p.type, p.\"notnull\", p.dflt_value, p.pk, p.hidden "
    "FROM pragma_table_xinfo(?) AS p ORDER BY p.cid"
)
_SQLITE_FKS = (
    "SELECT m.name, f.id, f.seq, f.\"table\", f.\"from\", f.\"to\" "
    "FROM sqlite_master AS m JOIN pragma_foreign_key_list(m.name) AS f "
    "WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY m.name, f.id, f.seq"
)
_SQLITE_UNIQUES = (
    "SELECT m.name, il.name, ii.seqno, ii.name "
    "FROM sqlite_master AS m JOIN pragma_index_list(m.name) AS il JOIN pragma_index_info(il.name) AS ii "
    "WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
    "AND il.\"unique\" = 1 AND il.origin = 'u' ORDER BY m.name, il.name, ii.seqno"
)

# --------------------------------------------------------------------------------------------
# PostgreSQL: three pg_catalog queries for all indexed schemas
# --------------------------------------------------------------------------------------------
_PG_SCHEMAS = (
    "SELECT n.nspname, has_schema_privilege(n.oid, 'USAGE') FROM pg_namespace AS n "
    "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') "
    "AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp\\_%'"
)
_PG_REL_FILTER = (
    "c.relkind IN ('r', 'p', 'v', 'm', 'f') AND NOT c.relispartition AND n.nspname = ANY(:schemas)"
)
_PG_RELATIONS = (
    "SELECT c.oid, n.nspname, c.relname, c.relkind, obj_description(c.oid, 'pg_class') "
    "FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace "
    f"WHERE {_PG_REL_FILTER}"
)
_PG_COLUMNS = (
    "SELECT a.attrelid, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, "
    "pg_get_expr(d.adbin, d.adrelid), col_description(a.attrelid, a.attnum) "
    "FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid "
    "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
    "LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
    f"WHERE a.attnum > 0 AND NOT a.attisdropped AND {_PG_REL_FILTER} "
    "ORDER BY a.attrelid, a.attnum"
)
_PG_CONSTRAINTS = (
    "SELECT co.conrelid, co.conname, co.contype, "
    "ARRAY(SELECT a.attname::text FROM unnest(co.conkey) WITH ORDINALITY AS k(num, pos) "
    "      JOIN pg_attribute AS a ON a.attrelid = co.conrelid AND a.attnum = k.num ORDER BY k.pos), "
    "rn.nspname, rc.relname, "
    "ARRAY(SELECT a.attname::text FROM unnest(co.confkey) WITH ORDINALITY AS k(num, pos) "
    "      JOIN pg_attribute AS a ON a.attrelid = co.confrelid AND a.attnum = k.num ORDER BY k.pos) "
    "FROM pg_constraint AS co JOIN pg_class AS c ON c.oid = co.conrelid "
    "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
    "LEFT JOIN pg_class AS rc ON rc.oid = co.confrelid "
    "LEFT JOIN pg_namespace AS rn ON rn.oid = rc.relnamespace "
    f"WHERE co.contype IN ('p', 'u', 'f') AND {_PG_REL_FILTER} ORDER BY co.conrelid, co.conname"
)
# --------------------------------------------------------------------------------------------
# MySQL / MariaDB: three information_schema queries (SQLAlchemy's MySQL reflection parses
# SHOW CREATE TABLE and returns a column named ``a`b`` as ``a``b``; the catalog does not)
# --------------------------------------------------------------------------------------------
_MY_TABLES = (
    "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE, TABLE_COMMENT FROM information_schema.TABLES "
    "WHERE TABLE_SCHEMA IN :schemas AND TABLE_TYPE IN ('BASE TABLE', 'VIEW', 'SYSTEM VERSIONED')"
)
_MY_COLUMNS = (
    "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, COLUMN_COMMENT "
    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA IN :schemas "
    "ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION"
)
_MY_CONSTRAINTS = (
    "SELECT tc.TABLE_SCHEMA, tc.TABLE_NAME, tc.CONSTRAINT_NAME, tc.CONSTRAINT_TYPE, k.COLUMN_NAME, "
    "k.REFERENCED_TABLE_SCHEMA, k.REFERENCED_TABLE_NAME, k.REFERENCED_COLUMN_NAME "
    "FROM information_schema.TABLE_CONSTRAINTS AS tc JOIN information_schema.KEY_COLUMN_USAGE AS k "
    "ON k.CONSTRAINT_SCHEMA = tc.CONSTRAINT_SCHEMA AND k.TABLE_SCHEMA = tc.TABLE_SCHEMA "
    "AND k.TABLE_NAME = tc.TABLE_NAME AND k.CONSTRAINT_NAME = tc.CONSTRAINT_NAME "
    "WHERE tc.TABLE_SCHEMA IN :schemas AND tc.CONSTRAINT_TYPE IN ('PRIMARY KEY', 'UNIQUE', 'FOREIGN KEY') "
    "ORDER BY tc.TABLE_SCHEMA, tc.TABLE_NAME, tc.CONSTRAINT_NAME, k.ORDINAL_POSITION"
)


class CatalogReader:
    """Reads one connection's catalog: the dialect's fast path, or SQLAlchemy's bulk reflection.

    Kept apart from the adapter because the catalog SQL of three dialects is most of the code
    and changes independently of connection handling and statistics. Tables or schemas that
    are skipped (a broken SQLite view, a PostgreSQL schema without ``USAGE``) are reported in
    :attr:`warnings`, which become snapshot warnings.
    """

    def __init__(self, config: DatasourceConfig, dialect: str, default_schema: str | None,
                 secrets: list[str]) -> None:
        """``default_schema`` is the session's (the URL's database on MySQL/MariaDB); ``secrets``
        are redacted from the warnings."""
        self.config = config
        self.dialect = dialect
        self.default_schema = default_schema
        self.secrets = secrets
        self.warnings: list[str] = []

    def read(self, conn: Connection, reflection: Literal["auto", "inspector"] = "auto") -> list[RawTable]:
        """The catalog as raw records; ``reflection="inspector"`` forces the generic path."""
        if reflection == "auto" and self.dialect == "sqlite":
            return self._read_sqlite(conn)
        if reflection == "auto" and self.dialect == "postgresql":
            return self._read_postgresql(conn)
        if reflection == "auto" and self.dialect in ("mysql", "mariadb"):
            return self._read_mysql(conn)
        return self._read_inspector(conn)

    # SQLite -------------------------------------------------------------------------------
    def _read_sqlite(self, conn: Connection) -> list[RawTable]:
        if self.config.schemas and set(self.config.schemas) != {"main"}:
            raise DatasourceError(self.config.id, "SQLite has no schemas besides 'main'; configured "
                                                  f"schemas: {', '.join(self.config.schemas)}")
        tables = {name: RawTable(None, name, kind) for name, kind in conn.exec_driver_sql(_SQLITE_TABLES)}
        try:
            column_rows = list(conn.exec_driver_sql(_SQLITE_COLUMNS))
        except sa.exc.OperationalError:  # one broken view fails the join: read table by table
            column_rows = []
            for name in sorted(tables):
                try:
                    column_rows.extend(conn.exec_driver_sql(_SQLITE_COLUMNS_ONE, (name, name)))
                except sa.exc.OperationalError as exc:
                    self.warnings.append(f"{tables[name].kind} {name} skipped: "
                                         f"{describe_exception(exc, self.secrets)}")
                    tables.pop(name)
        pk_positions: dict[str, list[tuple[int, str]]] = {}
        for table, _cid, name, dtype, notnull, default, pk, hidden in column_rows:
            raw = tables.get(table)
            if raw is None or hidden == 1:  # hidden == 1: a virtual table's hidden column
                continue
            raw.columns.append(RawColumn(name, dtype or "", not notnull, default))
            if pk:
                pk_positions.setdefault(table, []).append((pk, name))
        for table, cols in pk_positions.items():
            tables[table].primary_key = [name for _, name in sorted(cols)]
        by_lower = {name.lower(): name for name in tables}
        fks: dict[tuple[str, int], RawForeignKey] = {}
        for table, fk_id, _seq, ref, col, ref_col in conn.exec_driver_sql(_SQLITE_FKS):
            if table not in tables:
                continue
            ref_name = by_lower.get(str(ref).lower(), ref)
            fk = fks.get((table, fk_id))
            if fk is None:
                fk = fks[(table, fk_id)] = RawForeignKey(None, [], None, ref_name, [])
                tables[table].foreign_keys.append(fk)
            fk.columns.append(col)
            fk.ref_columns.append(ref_col)  # None: the referenced table's primary key, resolved below
        for (_table, _id), fk in fks.items():
            if any(c is None for c in fk.ref_columns):
                target = tables.get(fk.ref_table)
                pk = target.primary_key if target else []
                fk.ref_columns = list(pk) if len(pk) == len(fk.columns) else [c or "" for c in fk.ref_columns]
        uniques: dict[tuple[str, str], list[str]] = {}
        for table, index, _seq, col in conn.exec_driver_sql(_SQLITE_UNIQUES):
            if table in tables:
                uniques.setdefault((table, index), []).append(col)
        for (table, _index), cols in uniques.items():
            tables[table].uniques.append((None, cols))
        return list(tables.values())

    # PostgreSQL ---------------------------------------------------------------------------
    def _pg_schemas(self, conn: Connection) -> list[str]:
        present = {name: bool(usable) for name, usable in conn.execute(sa.text(_PG_SCHEMAS))}
        if self.config.schemas is None:
            unusable = sorted(n for n, ok in present.items() if not ok)
            for name in unusable:
                self.warnings.append(f"schema {name} skipped: the role lacks USAGE on it")
            return sorted(n for n, ok in present.items() if ok)
        missing = [s for s in self.config.schemas if s not in present]
        if missing:
            raise DatasourceError(self.config.id, f"configured schemas not found: {', '.join(missing)}")
        denied = [s for s in self.config.schemas if not present[s]]
        if denied:
            raise DatasourceUnavailableError(
                self.config.id, f"permission denied: the role lacks USAGE on schema {', '.join(denied)}")
        return list(self.config.schemas)

    def _read_postgresql(self, conn: Connection) -> list[RawTable]:
        schemas = self._pg_schemas(conn)
        params = {"schemas": schemas}
        tables: dict[int, RawTable] = {}
        for oid, schema, name, relkind, comment in conn.execute(sa.text(_PG_RELATIONS), params):
            tables[oid] = RawTable(schema, name, "view" if relkind in ("v", "m") else "table", comment)
        for oid, name, dtype, notnull, default, comment in conn.execute(sa.text(_PG_COLUMNS), params):
            raw = tables.get(oid)
            if raw is not None:
                raw.columns.append(RawColumn(name, dtype, not notnull, default, comment))
        for oid, cname, ctype, cols, ref_schema, ref_table, ref_cols in conn.execute(
                sa.text(_PG_CONSTRAINTS), params):
            raw = tables.get(oid)
            if raw is None:
                continue
            if ctype == "p":
                raw.primary_key = list(cols)
            elif ctype == "u":
                raw.uniques.append((cname, list(cols)))
            else:
                raw.foreign_keys.append(RawForeignKey(cname, list(cols), ref_schema, ref_table, list(ref_cols)))
        return list(tables.values())

    # MySQL / MariaDB ----------------------------------------------------------------------
    def _read_mysql(self, conn: Connection) -> list[RawTable]:
        schemas = self._inspector_schemas(sa.inspect(conn))
        default = self.default_schema
        names = [s or default for s in schemas]

        def key(schema: str) -> str | None:
            return None if schema == default else schema

        def run(sql: str) -> sa.CursorResult[Any]:
            stmt = sa.text(sql).bindparams(sa.bindparam("schemas", expanding=True))
            return conn.execute(stmt, {"schemas": names})

        tables: dict[tuple[str | None, str], RawTable] = {}
        for schema, name, ttype, comment in run(_MY_TABLES):
            view = ttype == "VIEW"
            tables[(key(schema), name)] = RawTable(key(schema), name, "view" if view else "table",
                                                   None if view else comment)
        for schema, name, col, ctype, nullable, default_value, comment in run(_MY_COLUMNS):
            raw = tables.get((key(schema), name))
            if raw is not None:
                if default_value is not None and str(default_value).upper() == "NULL":
                    default_value = None
                raw.columns.append(RawColumn(col, str(ctype), nullable == "YES",
                                             None if default_value is None else str(default_value), comment))
        fks: dict[tuple[str | None, str, str], RawForeignKey] = {}
        uniques: dict[tuple[str | None, str, str], list[str]] = {}
        for schema, name, cname, ctype, col, ref_schema, ref_table, ref_col in run(_MY_CONSTRAINTS):
            raw = tables.get((key(schema), name))
            if raw is None:
                continue
            if ctype == "PRIMARY KEY":
                raw.primary_key.append(col)
            elif ctype == "UNIQUE":
                if (key(schema), name, cname) not in uniques:
                    uniques[(key(schema), name, cname)] = []
                    raw.uniques.append((cname, uniques[(key(schema), name, cname)]))
                uniques[(key(schema), name, cname)].append(col)
            else:
                fk = fks.get((key(schema), name, cname))
                if fk is None:
                    fk = fks[(key(schema), name, cname)] = RawForeignKey(cname, [], key(ref_schema), ref_table, [])
                    raw.foreign_keys.append(fk)
                fk.columns.append(col)
                fk.ref_columns.append(ref_col)
        return list(tables.values())

    # Generic: SQLAlchemy bulk reflection ---------------------------------------------------
    def _inspector_schemas(self, inspector: sa.Inspector) -> list[str | None]:
        dialect = self.dialect
        if dialect == "sqlite":
            if self.config.schemas and set(self.config.schemas) != {"main"}:
                raise DatasourceError(self.config.id, "SQLite has no schemas besides 'main'")
            return [None]
        present = set(inspector.get_schema_names())
        if self.config.schemas is not None:
            missing = [s for s in self.config.schemas if s not in present]
            if missing:
                raise DatasourceError(self.config.id, f"configured schemas not found: {', '.join(missing)}")
            if dialect in _SINGLE_SCHEMA_DIALECTS:
                return [None if s == self.default_schema else s for s in self.config.schemas]
            return list(self.config.schemas)
        if dialect in _SINGLE_SCHEMA_DIALECTS:
            return [None]
        return sorted(s for s in present if s not in SYSTEM_SCHEMAS and not s.startswith("pg_"))

    def _read_inspector(self, conn: Connection) -> list[RawTable]:
        inspector = sa.inspect(conn)
        dialect = conn.dialect
        out: list[RawTable] = []
        single = self.dialect in _SINGLE_SCHEMA_DIALECTS
        for schema in self._inspector_schemas(inspector):
            schema_name = schema if (schema is not None or single) else self.default_schema
            views = set(inspector.get_view_names(schema))
            try:
                views |= set(inspector.get_materialized_view_names(schema))
            except NotImplementedError:
                pass
            kind, scope = ObjectKind.ANY, ObjectScope.DEFAULT
            with warnings.catch_warnings():  # "did not recognize type": the column is kept, typed ''
                warnings.simplefilter("ignore", sa.exc.SAWarning)
                columns = inspector.get_multi_columns(schema=schema, kind=kind, scope=scope)
            pks = inspector.get_multi_pk_constraint(schema=schema, kind=kind, scope=scope)
            fks = inspector.get_multi_foreign_keys(schema=schema, kind=kind, scope=scope)
            uniques = _optional(lambda: inspector.get_multi_unique_constraints(schema=schema, kind=kind,
                                                                               scope=scope))
            comments = (_optional(lambda: inspector.get_multi_table_comment(schema=schema, kind=kind, scope=scope))
                        if dialect.supports_comments else {})
            for key, cols in columns.items():
                name = key[1]
                raw = RawTable(schema_name, name, "view" if name in views else "table",
                               (comments.get(key) or {}).get("text"))
                raw.columns = [RawColumn(c["name"], _type_text(c["type"], dialect), bool(c.get("nullable", True)),
                                         None if c.get("default") is None else str(c["default"]), c.get("comment"))
                               for c in cols]
                raw.primary_key = list((pks.get(key) or {}).get("constrained_columns") or [])
                raw.uniques = [(u.get("name"), list(u["column_names"])) for u in uniques.get(key, [])]
                for fk in fks.get(key, []):
                    ref_schema = fk.get("referred_schema")
                    if ref_schema is None or (single and ref_schema == self.default_schema):
                        ref_schema = schema_name if not single or ref_schema is None else None
                    raw.foreign_keys.append(RawForeignKey(fk.get("name"), list(fk["constrained_columns"]),
                                                          ref_schema, fk["referred_table"],
                                                          list(fk["referred_columns"])))
                out.append(raw)
        return out


def _optional(read: Any) -> dict[Any, Any]:
    """A reflection call some dialects do not implement: empty when not implemented."""
    try:
        return dict(read())
    except NotImplementedError:
        return {}


def _type_text(type_: Any, dialect: sa.Dialect) -> str:
    """A reflected type as the dialect spells it (``VARCHAR(20)``), else its generic name."""
    try:
        return str(type_.compile(dialect=dialect))
    except Exception:  # noqa: BLE001 - NullType and exotic types do not compile; the name will do
        return "" if isinstance(type_, sa.types.NullType) else str(type(type_).__name__).upper()
