"""Personal data detection: by column name, and by value patterns in a sample.

A column flagged here gets ``Column.pii = True`` and a ``pii_kind``; the statistics code then
never records its sample values, minimum or maximum. Name rules run on every structure read
(no data needed); value rules run on the sampled values during statistics and see them only in
memory (nothing here logs or returns a value).

Value checks are strict on purpose: card numbers must pass the Luhn check, IBANs the mod-97
check, US SSNs the issuing rules, IP addresses the ``ipaddress`` parser. A column is flagged
when at least half of its non-empty sampled values match one kind.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

from nl2sql_assets.schema.models import TypeFamily

_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NON_ALNUM_RE = re.compile(r"[^0-9a-zA-Z]+")

# (kind, pattern over the normalized snake_case name, families it applies to)
_TEXTISH: frozenset[str] = frozenset({"text", "other", "binary", "json"})
_NUMBERISH: frozenset[str] = _TEXTISH | {"integer", "decimal"}
_DATEISH: frozenset[str] = _TEXTISH | {"date", "datetime", "integer"}
_NAME_RULES: list[tuple[str, re.Pattern[str], frozenset[str]]] = [
    ("credential", re.compile(r"(^|_)(password|passwd|pwd|passphrase|secret|api_key|apikey|"
                              r"access_token|refresh_token|auth_token|private_key)(_|$)"), _TEXTISH),
    ("email", re.compile(r"(^|_)(e_?mail|email_address|mail_address|mail)(_|$)|email"), _TEXTISH),
    ("phone", re.compile(r"(^|_)(phone|telephone|tel|mobile|cell|cellphone|fax|msisdn|"
                         r"phone_number|phonenumber|mobile_number)(_|$)|phone"), _NUMBERISH),
    ("national_id", re.compile(r"(^|_)(ssn|social_security(_number)?|national_id|nationalid|"
                               r"national_insurance(_number)?|nino|tax_id|taxid|tin|sin|"
                               r"personal_id|personnummer|bsn|nir|aadhaar|id_card(_number)?)(_|$)"),
     _NUMBERISH),
    ("iban", re.compile(r"(^|_)(iban|bank_account(_number)?|account_iban)(_|$)|iban"), _NUMBERISH),
    ("card_number", re.compile(r"(^|_)(credit_card|card_number|card_no|cc_number|ccnum|pan|"
                               r"cvv|cvc|card_num|cardnumber|creditcard)(_|$)"), _NUMBERISH),
    ("passport", re.compile(r"passport"), _NUMBERISH),
    ("driver_license", re.compile(r"(driver|driving)s?_licen[cs]e"), _NUMBERISH),
    ("ip_address", re.compile(r"(^|_)(ip|ip_address|ipaddress|ipaddr|ip_addr|ipv4|ipv6|"
                              r"remote_addr|client_ip|remote_ip)(_|$)"), _TEXTISH),
    ("birth_date", re.compile(r"(^|_)(dob|birth|birthdate|birthday|date_of_birth|birth_date|"
                              r"born|born_on)(_|$)"), _DATEISH),
    ("person_name", re.compile(r"(^|_)(first_name|firstname|last_name|lastname|full_name|fullname|"
                               r"given_name|family_name|middle_name|maiden_name|surname|forename|"
                               r"customer_name|contact_name|employee_name|person_name|"
                               r"patient_name)(_|$)"), _TEXTISH),
    ("address", re.compile(r"(^|_)(street|street_address|address|address_line|address_line_\d|"
                           r"address\d|addr|home_address|postal_address|mailing_address|"
                           r"billing_address|shipping_address)(_|$)"), _TEXTISH),
]
_ANY_RULE = re.compile("|".join(f"(?:{pattern.pattern})" for _, pattern, _ in _NAME_RULES))
# Last words that make a column *about* personal data rather than holding it.
_NOT_PII_LAST = {"count", "cnt", "type", "status", "verified", "flag", "enabled", "confirmed",
                 "consent", "optin", "opt", "domain", "provider", "format", "country", "code",
                 "kind", "valid", "is", "has", "len", "length", "hash", "hashed", "at", "on",
                 "ts", "policy", "template", "changed", "updated", "sent", "bounced", "visible",
                 "required", "id", "ids", "key"}
_ID_KINDS = {"national_id", "passport", "driver_license", "card_number", "iban", "credential"}


def normalize_name(name: str) -> str:
    """A column name in snake_case, for the name rules.

    >>> normalize_name("customerEmailAddress")
    'customer_email_address'
    >>> normalize_name("Date of Birth")
    'date_of_birth'
    """
    spaced = _CAMEL_RE.sub("_", name)
    return "_".join(w for w in _NON_ALNUM_RE.split(spaced) if w).lower()


def pii_kind_from_name(name: str, family: TypeFamily | str = "text") -> str | None:
    """The kind of personal data a column's name says it holds, or None.

    Boolean columns and names ending in a word like ``count``, ``verified`` or ``status``
    describe personal data without holding it and are not flagged.

    >>> pii_kind_from_name("email"), pii_kind_from_name("CustomerEmail"), pii_kind_from_name("phone_number")
    ('email', 'email', 'phone')
    >>> pii_kind_from_name("ssn"), pii_kind_from_name("iban"), pii_kind_from_name("credit_card_number")
    ('national_id', 'iban', 'card_number')
    >>> pii_kind_from_name("date_of_birth", "date"), pii_kind_from_name("last_name"), pii_kind_from_name("ip_address")
    ('birth_date', 'person_name', 'ip_address')
    >>> pii_kind_from_name("email_verified", "boolean"), pii_kind_from_name("email_count", "integer")
    (None, None)
    >>> pii_kind_from_name("product_name"), pii_kind_from_name("status"), pii_kind_from_name("shipping_date", "date")
    (None, None, None)
    >>> pii_kind_from_name("passport_id"), pii_kind_from_name("phone", "integer"), pii_kind_from_name("zip")
    ('passport', 'phone', None)
    """
    if family == "boolean":
        return None
    norm = normalize_name(name)
    if not norm or not _ANY_RULE.search(norm):
        return None
    last = norm.rsplit("_", 1)[-1]
    for kind, pattern, families in _NAME_RULES:
        if family not in families or not pattern.search(norm):
            continue
        if last in _NOT_PII_LAST and not (kind in _ID_KINDS and last in {"id", "key"}) and norm != last:
            continue
        return kind
    return None


_EMAIL_RE = re.compile(r"^[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")
_SSN_RE = re.compile(r"^(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}$")
_CARD_RE = re.compile(r"^\d(?:[ -]?\d){12,18}$")
_IBAN_RE = re.compile(r"^[A-Z]{2}\d{2}[A-Z0-9]{11,30}$")
_PHONE_RES = (
    re.compile(r"^\+\d[\d ().-]{6,20}\d$"),                         # international
    re.compile(r"^\(?\d{3}\)?[ .-]?\d{3}[ .-]\d{4}$"),               # North American
    re.compile(r"^0\d{1,4}[ /-]\d{2,}(?:[ -]\d{2,})*$"),              # national, with a separator
)
_DATE_LIKE_RE = re.compile(r"^\d{4}[-/.]\d{1,2}[-/.]\d{1,2}")


def luhn_valid(digits: str) -> bool:
    """The Luhn check of card numbers.

    >>> luhn_valid("4111111111111111"), luhn_valid("4111111111111112")
    (True, False)
    """
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def iban_valid(text: str) -> bool:
    """The ISO 13616 mod-97 check of an IBAN (spaces allowed).

    >>> iban_valid("DE89 3704 0044 0532 0130 00"), iban_valid("DE89 3704 0044 0532 0130 01")
    (True, False)
    """
    compact = text.replace(" ", "").upper()
    if not _IBAN_RE.match(compact):
        return False
    rearranged = compact[4:] + compact[:4]
    number = "".join(str(int(c, 36)) for c in rearranged)
    return int(number) % 97 == 1


def value_kind(value: str) -> str | None:
    """The kind of personal data one value looks like, or None.

    >>> [value_kind(v) for v in ("ann@example.com", "+49 30 1234567", "(555) 123-4567", "078-05-1120")]
    ['email', 'phone', 'phone', 'national_id']
    >>> [value_kind(v) for v in ("4111 1111 1111 1111", "GB82WEST12345698765432", "192.168.0.1", "2001:db8::1")]
    ['card_number', 'iban', 'ip_address', 'ip_address']
    >>> [value_kind(v) for v in ("2024-01-15", "paid", "12345", "4111111111111112", "1.2.3")]
    [None, None, None, None, None]
    """
    text = value.strip()
    if len(text) < 3 or len(text) > 320:
        return None
    if "@" in text:
        return "email" if _EMAIL_RE.match(text) else None
    if _DATE_LIKE_RE.match(text):
        return None
    first = text[0]
    if first.isalpha() and text[:2].isalpha() and text[2:4].isdigit() and iban_valid(text):
        return "iban"
    if _SSN_RE.match(text):
        return "national_id"
    if _CARD_RE.match(text):
        digits = text.replace(" ", "").replace("-", "")
        if luhn_valid(digits) and digits[0] in "3456":
            return "card_number"
    if ":" in text or text.count(".") == 3:
        try:
            ipaddress.ip_address(text)
            return "ip_address"
        except ValueError:
            pass
    for pattern in _PHONE_RES:
        if pattern.match(text):
            digits = sum(ch.isdigit() for ch in text)
            if 7 <= digits <= 15:
                return "phone"
    return None


def pii_kind_from_values(values: Iterable[object], *, min_ratio: float = 0.5) -> str | None:
    """The kind most sampled values look like, when at least ``min_ratio`` of the non-empty
    string values share it; None otherwise. Non-string values are ignored.

    >>> pii_kind_from_values(["a@x.org", "b@y.com", None, "n/a"])
    'email'
    >>> pii_kind_from_values(["paid", "open", "a@x.org"]) is None
    True
    >>> pii_kind_from_values([]) is None
    True
    """
    counts: dict[str, int] = {}
    seen = 0
    for value in values:
        if not isinstance(value, str) or not value.strip():
            continue
        seen += 1
        kind = value_kind(value)
        if kind is not None:
            counts[kind] = counts.get(kind, 0) + 1
    if not seen or not counts:
        return None
    kind, hits = max(counts.items(), key=lambda item: (item[1], item[0]))
    return kind if hits / seen >= min_ratio else None
