"""Database URLs that carry credentials: ``${VAR}`` substitution into parsed parts, and redaction.

Why substitute after parsing: a value pasted into the URL text before parsing lets a password
holding ``@``, ``:``, ``/``, ``#``, ``%`` or ``?`` move the boundaries between user, password
and host; the driver then tries to resolve a "host" made of the rest of the password and
prints it. Parsing the template first (each ``${VAR}`` stands in as a unique digit token) and
then putting each value into the component it sits in makes every character work, with
nothing to escape.

Why mask whole components: replacing every occurrence of a short password in free text
garbles it (a password ``M`` turned "MySQL" into "***ySQL") while still missing the URL
itself. So a URL's password and its credential-like query parameters are always masked
wherever a URL appears, a known secret of 4 characters or more is masked anywhere, and a
shorter one only where it stands alone between spaces, quotes or brackets.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import quote, quote_plus, unquote

from sqlalchemy.engine.url import URL, make_url
from sqlalchemy.exc import ArgumentError

from nl2sql_assets.errors import ConfigError

VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: Secrets shorter than this are masked in free text only where they stand alone.
MIN_FREE_TEXT_SECRET = 4
MASK = "***"

_SCHEME = r"[a-zA-Z][a-zA-Z0-9+.-]*://"
# ``scheme://user:PASSWORD@``: the password runs to the LAST ``@`` of the token, because a
# password may itself hold ``@`` (over-masking an ``@`` in the path beats leaking).
_USERINFO_RE = re.compile(rf"(?P<pre>{_SCHEME}[^:/\s'\"]*:)(?P<pw>[^\s'\"]*)@")
_CREDENTIAL_KEY = r"[\w.-]*?(?:password|passwd|pwd|secret|token|api_?key|key)[\w.-]*"
_CREDENTIAL_KEY_RE = re.compile(rf"(?i)^{_CREDENTIAL_KEY}$")
# ``?password=...``, ``&api_key=...``, and libpq-style ``password=...`` in free text
_CREDENTIAL_PARAM_RE = re.compile(
    rf"(?i)(?P<pre>(?:^|(?<=[?&;\s(\[,'\"])){_CREDENTIAL_KEY}=)(?P<val>[^&\s'\"]*)")
_TOKEN_BASE = 902_100_000_000
# what may stand around a short secret for it to count as a whole token ("M" in "(user 'M')",
# never in "MySQL" nor "127.0.0.1")
_TOKEN_EDGE = r"\s'\"()\[\]{}<>,;"


class UrlSyntaxError(ConfigError):
    """A URL that does not parse, or whose port is not a number (``reason`` holds no secret);
    as opposed to a variable that is not set."""

    def __init__(self, reason: str, *, entry: str | None = None) -> None:
        super().__init__(reason, entry=entry, field="url")
        self.reason = reason


def redact_url(text: str) -> str:
    """Mask every URL password and every credential-like query parameter in ``text``.

    >>> redact_url("postgresql://bob:hunter2@db:5432/x")
    'postgresql://bob:***@db:5432/x'
    >>> redact_url("mysql://u:p@ss:w/rd@127.0.0.1/x?charset=utf8&password=s3&sslkey=/k.pem")
    'mysql://u:***@127.0.0.1/x?charset=utf8&password=***&sslkey=***'
    >>> redact_url("store x://h/db?token=***: refused")  # masked already: the colon stays
    'store x://h/db?token=***: refused'
    """
    out = _USERINFO_RE.sub(lambda m: f"{m.group('pre')}{MASK}@" if m.group("pw") else m.group(0), text)
    # a value masked already keeps what follows it ("?password=***: cannot connect")
    return _CREDENTIAL_PARAM_RE.sub(
        lambda m: m.group(0) if m.group("val").startswith(MASK) or not m.group("val") else f"{m.group('pre')}{MASK}",
        out)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every URL credential and every given secret masked, ordinary words intact.

    >>> redact_text("Can't connect to MySQL server on '127.0.0.1' (user 'M')", ["M", "1"])
    "Can't connect to MySQL server on '127.0.0.1' (user '***')"
    >>> redact_text("login as bob with Zq7@Wx:9 failed", ["Zq7@Wx:9"])
    'login as bob with *** failed'
    """
    out = redact_url(text)
    for secret in sorted({s for s in secrets if s and s != MASK}, key=len, reverse=True):
        if len(secret) >= MIN_FREE_TEXT_SECRET:
            out = out.replace(secret, MASK)
        else:
            out = re.sub(rf"(?<![^{_TOKEN_EDGE}]){re.escape(secret)}(?![^{_TOKEN_EDGE}])", MASK, out)
    return out


def url_password(url: str) -> str | None:
    """The password of a URL as written (still percent-encoded); None when it has none.

    >>> url_password("postgresql://u:p@ss@h/db"), url_password("sqlite:///x.db")
    ('p@ss', None)
    """
    match = _USERINFO_RE.search(url)
    return match.group("pw") if match and match.group("pw") else None


def _forms(value: str) -> list[str]:
    """A secret as given and in every escaped form a URL or a driver may show it in."""
    return [value, quote(value, safe=" +"), quote(value, safe=""), quote_plus(value)]


def url_secrets(url: URL | str) -> list[str]:
    """Every string to remove from texts derived from ``url``: its password and its
    credential-like query values, decoded and encoded; longest first.

    >>> url_secrets("postgresql://u:p%40ss@h/db?sslmode=require&password=q1")
    ['p%40ss', 'p@ss', 'q1']
    >>> url_secrets("sqlite:///x.db")
    []
    """
    found: list[str] = []
    if isinstance(url, str):
        written = url_password(url)
        if written:
            found += [written, unquote(written)]
        try:
            url = make_url(url)
        except (ArgumentError, ValueError, TypeError):
            return _unique(found)
    if url.password:
        found += _forms(str(url.password))
    for key, value in url.query.items():
        if _CREDENTIAL_KEY_RE.match(key):
            for item in (value,) if isinstance(value, str) else value:
                found += _forms(item)
    return _unique(found)


def _unique(values: list[str]) -> list[str]:
    return sorted({v for v in values if v}, key=lambda v: (-len(v), v))


def expand_env(text: str, env: Mapping[str, str] | None = None, *, entry: str | None = None) -> str:
    """Replace ``${VAR}`` in plain text with the variable's value; a missing variable raises ConfigError.

    Only for text that is not parsed as a URL afterwards (a DuckDB file path): URLs go through
    :func:`resolve_url`.

    >>> expand_env("duckdb:///${DIR}/x.duckdb", {"DIR": "/data"})
    'duckdb:////data/x.duckdb'
    """
    env = os.environ if env is None else env
    return VAR_RE.sub(lambda m: _value(m.group(1), env, entry), text)


def _value(name: str, env: Mapping[str, str], entry: str | None) -> str:
    if name not in env:
        raise ConfigError(f"environment variable {name} is not set", entry=entry, field="url")
    return env[name]


def resolve_url(template: str, env: Mapping[str, str] | None = None, *, entry: str | None = None) -> URL:
    """The parsed URL of ``template`` with each ``${VAR}`` put into the component it stands in.

    Any character works in a value (``@ : / # % ?`` included); nothing is percent-decoded in it.

    >>> env = {"PW": "a@b:c/d#%?", "HOST": "db", "PORT": "5433"}
    >>> url = resolve_url("postgresql://bob:${PW}@${HOST}:${PORT}/x", env)
    >>> (url.password, url.host, url.port)
    ('a@b:c/d#%?', 'db', 5433)

    Raises:
        ConfigError: a variable is not set.
        UrlSyntaxError: the URL does not parse, or a port from the environment is not a number.
    """
    env = os.environ if env is None else env
    names = list(dict.fromkeys(VAR_RE.findall(template)))
    values = {name: _value(name, env, entry) for name in names}
    tokens = _tokens(template, names)
    try:
        parsed = make_url(VAR_RE.sub(lambda m: tokens[m.group(1)], template))
    except (ArgumentError, ValueError) as exc:
        raise UrlSyntaxError(f"malformed URL {redact_url(template)!r}: {redact_text(str(exc))}",
                             entry=entry) from None
    if not names:
        return parsed
    by_token = {tokens[name]: values[name] for name in names}
    token_re = re.compile("|".join(by_token))

    def fill(part: str | None) -> str | None:
        return None if part is None else token_re.sub(lambda m: by_token[m.group(0)], part)

    port = parsed.port
    if port is not None and token_re.search(str(port)):
        text = fill(str(port)) or ""
        if not text.isdigit():
            raise UrlSyntaxError(f"the port from the environment must be a whole number, got {text!r}",
                                 entry=entry)
        port = int(text)
    query = {fill(k) or "": (fill(v) if isinstance(v, str) else tuple(fill(i) or "" for i in v))
             for k, v in parsed.query.items()}
    return URL.create(parsed.drivername, fill(parsed.username), fill(parsed.password), fill(parsed.host),
                      port, fill(parsed.database), query)  # type: ignore[arg-type]


def _tokens(template: str, names: list[str]) -> dict[str, str]:
    """One digit-only stand-in per variable (valid in every component, the port included),
    none of which occurs in the template."""
    base = _TOKEN_BASE
    while True:
        tokens = {name: str(base + i) for i, name in enumerate(names)}
        if not any(token in template for token in tokens.values()):
            return tokens
        base += 1_000_000
