"""Driver exceptions -> clear :class:`DatasourceUnavailableError` messages without secrets.

Driver messages are useful ("connection refused", "permission denied for schema x") but may
echo parts of the URL. Every message is passed through :func:`redact_text` with every
credential of the URL (its password and credential-like query values, as written, decoded and
encoded), and the original exception is not chained (``from None``), so no traceback carries
it either. Short secrets are masked only where they stand alone, so "MySQL" stays "MySQL".
"""

from __future__ import annotations

from nl2sql_assets.config import redact_text, url_secrets
from nl2sql_assets.errors import DatasourceUnavailableError

_MAX_DETAIL = 300

# (category, lower-case fragments of driver messages)
_CATEGORIES: list[tuple[str, tuple[str, ...]]] = [
    ("authentication failed", ("password authentication failed", "using password:", "authentication failed",
                               "no password supplied", "role \"")),
    ("permission denied", ("permission denied", "access denied", "command denied", "not authorized",
                           "insufficient privilege", "must be owner")),
    ("database not found", ("unknown database", "database \"", "no such database")),
    ("server unreachable", ("could not connect", "connection refused", "can't connect", "timeout expired",
                            "timed out", "could not translate host name", "name or service not known",
                            "unknown host", "no route to host", "network is unreachable",
                            "server closed the connection", "lost connection", "connection reset")),
    ("file is locked", ("could not set lock", "database is locked", "conflicting lock",
                        "different configuration")),
]


def secrets_of(url: str) -> list[str]:
    """The strings to remove from any text derived from ``url``: its password and credential-like
    query values, encoded and decoded, longest first.

    >>> secrets_of("postgresql://u:p%40ss@h/db")
    ['p%40ss', 'p@ss']
    >>> secrets_of("mysql+pymysql://u@h/db?charset=utf8mb4&passwd=s3cr3t")
    ['s3cr3t']
    >>> secrets_of("sqlite:///x.db")
    []
    """
    return url_secrets(url)


def describe_exception(exc: BaseException, secrets: list[str]) -> str:
    """``Category (ExcType: first lines of the driver message)``, redacted and shortened."""
    original = getattr(exc, "orig", None) or exc
    text = str(original).strip() or type(original).__name__
    detail = " ".join(line.strip() for line in text.splitlines()[:3] if line.strip())
    # SQLAlchemy appends the statement and a background link; neither helps the reader.
    detail = detail.split("[SQL:", 1)[0].split("(Background on this error", 1)[0].strip()
    detail = redact_text(detail, secrets)
    if len(detail) > _MAX_DETAIL:
        detail = detail[:_MAX_DETAIL] + "..."
    lowered = str(original).lower()
    category = "cannot read the database"
    for name, fragments in _CATEGORIES:
        if any(f in lowered for f in fragments):
            category = name
            break
    return f"{category} ({type(original).__name__}: {detail})"


def unavailable(datasource_id: str, exc: BaseException, secrets: list[str],
                doing: str | None = None) -> DatasourceUnavailableError:
    """The error to raise for a driver failure; the caller raises it ``from None``."""
    prefix = f"{doing}: " if doing else ""
    return DatasourceUnavailableError(datasource_id, redact_text(prefix + describe_exception(exc, secrets),
                                                                 secrets))
