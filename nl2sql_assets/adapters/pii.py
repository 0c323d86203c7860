"""Personal data detection: by column name, and by values anywhere in a sample.

A column flagged here gets ``Column.pii = True`` and a ``pii_kind``; the statistics code then
never records its sample values, minimum or maximum. Name rules run on every structure read
(no data needed); value rules run on the sampled values during statistics and see them only in
memory (nothing here logs or returns a value).

Value checks are strict on purpose (card numbers: an issuer range and Luhn; IBANs: mod-97; US
SSNs: the issuing rules; IP addresses: ``ipaddress``) and look inside free text and numbers. A
column is flagged when half of its sampled values show one kind, or several kinds together a
substantial share (``mixed``). Names have no checksum: "Firstname Lastname" values count only
in a column whose name says it names a person (``owner``, ``account_holder``, ``created_by``).
:func:`recorded_value_kind` tests one value about to be recorded (min, max, a top value): the
adapters withhold what it finds and the blocking check refuses it.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections import Counter
from collections.abc import Iterable
from decimal import Decimal

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


# Words in a column name that say it names a person; they flag a column only with values shaped like
# "Firstname Lastname" (a name alone cannot: "owner" may hold a team, "contact" an e-mail address).
_PERSON_HINTS = frozenset({
    "owner", "holder", "contact", "assignee", "assigned", "creator", "requester", "requestor", "reporter", "approver",
    "reviewer", "recipient", "sender", "signer", "signatory", "beneficiary", "guarantor", "spouse", "kin", "guardian",
    "applicant", "user", "manager", "supervisor", "agent", "representative", "salesperson", "employee", "customer",
    "client", "patient", "person"})
_NAME_PARTICLES = frozenset({"van", "von", "der", "den", "de", "del", "della", "di", "da", "du", "la", "le", "bin", "al"})
_NOT_PERSON_WORDS = frozenset({
    "inc", "ltd", "llc", "llp", "corp", "corporation", "co", "company", "gmbh", "ag", "sa", "plc", "group", "bank",
    "university", "college", "school", "hospital", "clinic", "department", "team", "services", "solutions", "systems",
    "holdings", "partners", "foundation", "association", "club", "trust", "fund", "city", "county", "state", "street",
    "road", "avenue", "store", "shop", "office", "center", "centre"})


def person_hint(name: str) -> bool:
    """Whether a column name says it names a person (``owner``, ``account_holder``, ``created_by``).

    >>> [person_hint(n) for n in ("owner", "AccountHolder", "cardholder", "created_by", "emergency_contact")]
    [True, True, True, True, True]
    >>> [person_hint(n) for n in ("city", "category", "product_name", "by", "ownership_pct")]
    [False, False, False, False, False]
    """
    words = normalize_name(name).split("_")
    if len(words) >= 2 and words[-1] == "by":
        return True
    return any(w in _PERSON_HINTS or (w.endswith(("holder", "owner")) and len(w) > 6) for w in words)


def looks_like_person_name(text: str) -> bool:
    """Two or three capitalized alphabetic words ("Ann Lee", "Jean-Luc O'Neil", "Ludwig van Beethoven").

    >>> [looks_like_person_name(v) for v in ("Ann Lee", "María José García", "Anna K. Smith", "Sean O'Neil")]
    [True, True, True, True]
    >>> [looks_like_person_name(v) for v in ("Widget 3", "retail", "Acme Corp", "NEW YORK", "ann lee", "Ann")]
    [False, False, False, False, False, False]
    """
    capitalized = 0
    parts = text.split()
    if not 2 <= len(parts) <= 5:
        return False
    for index, part in enumerate(parts):
        if part in _NAME_PARTICLES and 0 < index < len(parts) - 1:
            continue
        if len(part) == 2 and part[0].isupper() and part[1] == "." and 0 < index < len(parts) - 1:
            continue  # a middle initial
        core = part.replace("'", "").replace("’", "").replace("-", "")
        if (not core.isalpha() or not part[0].isupper() or len(core) < 2 or core.isupper()
                or core.lower() in _NOT_PERSON_WORDS):
            return False
        capitalized += 1
    return 2 <= capitalized <= 3


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

_ANY_LENGTH = frozenset(range(13, 20))
_L16_19 = frozenset(range(16, 20))
_16 = frozenset({16})
# Issuer identification ranges: (lowest prefix, highest prefix of the same length, brand, lengths).
_CARD_RANGES: tuple[tuple[str, str, str, frozenset[int]], ...] = (
    ("4", "4", "visa", frozenset({13, 16, 19})), ("51", "55", "mastercard", _16), ("2221", "2720", "mastercard", _16),
    ("2200", "2204", "mir", _L16_19), ("34", "34", "amex", frozenset({15})), ("37", "37", "amex", frozenset({15})),
    ("300", "305", "diners", _ANY_LENGTH), ("3095", "3095", "diners", _ANY_LENGTH), ("36", "36", "diners", _ANY_LENGTH),
    ("38", "39", "diners", _ANY_LENGTH), ("3528", "3589", "jcb", _L16_19), ("353", "356", "rupay", _16),
    ("6011", "6011", "discover", _L16_19), ("644", "649", "discover", _L16_19), ("65", "65", "discover", _L16_19),
    ("62", "62", "unionpay", _L16_19), ("81", "81", "unionpay", _L16_19), ("82", "82", "rupay", _16),
    ("60", "60", "rupay", _16), ("508", "508", "rupay", _16), ("50", "50", "maestro", _ANY_LENGTH),
    ("56", "58", "maestro", _ANY_LENGTH), ("5893", "5893", "maestro", _ANY_LENGTH), ("6", "6", "maestro", _ANY_LENGTH),
    ("9792", "9792", "troy", _16),
)


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


def card_brand(digits: str) -> str | None:
    """The card scheme whose issuer range and length ``digits`` fit, when it passes Luhn; else None.

    >>> [card_brand(d) for d in ("2221000000000009", "2720999999999996", "5555555555554444", "378282246310005")]
    ['mastercard', 'mastercard', 'mastercard', 'amex']
    >>> [card_brand(d) for d in ("6011111111111117", "3530111333300000", "30569309025904", "6200000000000005")]
    ['discover', 'jcb', 'diners', 'unionpay']
    >>> [card_brand(d) for d in ("2721000000000004", "1234567812345670", "4111111111111112")]
    [None, None, None]
    """
    if not digits.isdigit() or len(digits) not in _ANY_LENGTH or not luhn_valid(digits):
        return None
    for low, high, brand, lengths in _CARD_RANGES:
        if len(digits) in lengths and low <= digits[:len(low)] <= high:
            return brand
    return None


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
    """The kind of personal data one whole value looks like, or None.

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
    if _CARD_RE.match(text) and card_brand(text.replace(" ", "").replace("-", "")):
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


SCAN_CHARS = 2000  # characters of one value scanned: bounds the cost of long texts (recorded values have <= 100)
_DIGIT_RE = re.compile(r"\d")
_EMAIL_SEARCH_RE = re.compile(r"[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
# ISO dates and times, blanked before looking for numbers: the commonest digits in free text
_ISO_DATE_RE = re.compile(r"(?<![\d.])\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?(?![\d.])")
# seven digits close together, or an IPv4 shape: a text without either holds no number worth a look
_NUMBERISH_RE = re.compile(r"\d(?:[ ().\-/]{0,2}\d){6}|\d\.\d{1,3}\.\d{1,3}\.\d")
# Digits with the separators phone, card and id numbers use; a space only before a digit or "(".
_NUMBER_RUN_RE = re.compile(r"(?<![\w.])\+?\(?\d(?:[\d().\-/]| (?=[\d(]))*\d\)?")
_DIGIT_GROUP_RE = re.compile(r"\+?\(?\d+\)?")
_NOT_DIGITS = str.maketrans("", "", " ().-/+")
_IBAN_SEARCH_RE = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{1,4}){3,8}(?![A-Za-z0-9])")
_IPV6_SEARCH_RE = re.compile(r"(?<![\w:.])(?=[0-9A-Fa-f:]*\d)[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:])")
_PART_KINDS, _MAX_GROUPS = frozenset({"card_number", "phone", "national_id"}), 6
_WHOLE_CHARS = 64  # texts longer or with spaces: the searches below find every kind in them


def _number_run_kind(run: str) -> str | None:
    """The kind of a run of digits and separators, or of a few adjacent digit groups inside it."""
    digits = len(run.translate(_NOT_DIGITS))
    if digits < 7:
        return "ip_address" if run.count(".") == 3 and value_kind(run) == "ip_address" else None
    kind = value_kind(run)
    if kind is not None:
        return kind
    groups = [(m.start(), m.end(), len(m.group().translate(_NOT_DIGITS))) for m in _DIGIT_GROUP_RE.finditer(run)]
    for i, (start, _, _) in enumerate(groups):
        count = 0
        for _, end, n in groups[i:i + _MAX_GROUPS]:
            count += n
            if count > 19:
                break
            if count >= 7 and end - start < len(run):
                kind = value_kind(run[start:end])
                if kind in _PART_KINDS:
                    return kind
    return None


def _iban_in(match: str) -> bool:
    """Whether the match, or the match without some trailing space-separated groups, is a valid IBAN."""
    groups = match.split(" ")
    return any(iban_valid("".join(groups[:n])) for n in range(len(groups), 0, -1) if len("".join(groups[:n])) >= 15)


def kinds_in_text(text: str) -> frozenset[str]:
    """Every kind of personal data found anywhere in a text: the whole value or inside free text.

    >>> sorted(kinds_in_text("Call +1 415 555 0100 or write to ann@example.com after 5pm"))
    ['email', 'phone']
    >>> sorted(kinds_in_text("paid with 5555 5555 5555 4444, ref. IBAN DE89 3704 0044 0532 0130 00 EUR"))
    ['card_number', 'iban']
    >>> sorted(kinds_in_text("login from 10.0.0.7 (ssn 078-05-1120)"))
    ['ip_address', 'national_id']
    >>> sorted(kinds_in_text("Widget 3, 2024-01-15 10:30, 12.5 kg, v1.2.3.4, order 1234567, 1999-2005"))
    []
    """
    text = text[:SCAN_CHARS]
    whole = value_kind(text) if len(text) <= _WHOLE_CHARS and " " not in text.strip() else None
    found = {whole} if whole else set()
    if "@" in text:
        found.update("email" for _ in _EMAIL_SEARCH_RE.finditer(text))
    if not _DIGIT_RE.search(text):
        return frozenset(found)
    if text.count(":") >= 2:
        for match in _IPV6_SEARCH_RE.finditer(text):
            if value_kind(match.group()) == "ip_address":
                found.add("ip_address")
    if "-" in text:
        text = _ISO_DATE_RE.sub(" ", text)
    if not _NUMBERISH_RE.search(text):
        return frozenset(found)
    for match in _IBAN_SEARCH_RE.finditer(text):
        if _iban_in(match.group()):
            found.add("iban")  # and its digits are not read again as a phone number
            text = text[:match.start()] + " " * (match.end() - match.start()) + text[match.end():]
    for match in _NUMBER_RUN_RE.finditer(text):
        run = match.group()
        kind = _number_run_kind(run if run.count("(") == run.count(")") else run.strip("()"))
        if kind is not None:
            found.add(kind)
    return frozenset(found)


def kinds_in_value(value: object) -> frozenset[str]:
    """Personal data in one sampled value: a text, or a number (card numbers stored as numbers).

    >>> kinds_in_value(2221000000000009), kinds_in_value(Decimal("4111111111111111")), kinds_in_value(42)
    (frozenset({'card_number'}), frozenset({'card_number'}), frozenset())
    """
    if isinstance(value, str):
        return kinds_in_text(value)
    if not isinstance(value, int | float | Decimal) or isinstance(value, bool):
        return frozenset()
    try:  # NaN, infinities, short and fractional numbers are no card numbers
        whole = int(value) if value == value and abs(value) >= 10**12 and value == int(value) else None
    except (OverflowError, ValueError, ArithmeticError):
        whole = None
    return frozenset({"card_number"}) if whole is not None and card_brand(str(whole)) else frozenset()


def recorded_value_kind(value: str, column_name: str | None = None) -> str | None:
    """The kind of personal data a value about to be recorded in statistics (min, max, a top
    value) shows, or None: anything :func:`kinds_in_text` finds, and a person's name in a column
    whose name says it holds one. The adapters withhold such a value; the blocking check refuses it.

    >>> recorded_value_kind("call 555-123-4567"), recorded_value_kind("Ann Lee", "owner"), recorded_value_kind("Ann Lee", "city")
    ('phone', 'person_name', None)
    """
    kinds = kinds_in_text(value)
    if kinds:
        return min(kinds)
    if column_name is not None and person_hint(column_name) and looks_like_person_name(value):
        return "person_name"
    return None


#: Share of values showing two or more kinds together (each on MIXED_KIND_RATIO) for a "mixed" column.
MIXED_RATIO = 0.3
MIXED_KIND_RATIO = 0.05


def _countable(value: object) -> str | int | float | Decimal | None:
    """A sampled value as the detectors read it; None for blanks and for values no pattern applies to."""
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, int | float | Decimal):
        return value
    return json.dumps(value, default=str) if isinstance(value, dict | list | tuple) else None


def pii_kind_from_values(values: Iterable[object], *, min_ratio: float = 0.5, person: bool = False) -> str | None:
    """The kind of personal data a column's sampled values hold, or None.

    A kind is found anywhere in a value (free text, JSON, numbers). The column holds it when at
    least ``min_ratio`` of the non-empty values show it; ``mixed`` when two or more kinds together
    show on ``MIXED_RATIO`` of them. With ``person`` (the column's name says it names a person),
    values shaped like a name count as ``person_name``. None, blanks and bytes are not counted.

    >>> pii_kind_from_values(["a@x.org", "b@y.com", None, "n/a"])
    'email'
    >>> pii_kind_from_values(["paid", "open", "a@x.org"]) is None
    True
    >>> pii_kind_from_values(["mail a@x.org", "call 555-123-4567", "ok", "fine", "good"])
    'mixed'
    >>> pii_kind_from_values(["Ann Lee", "Bo Chan", "n/a"], person=True), pii_kind_from_values(["Ann Lee", "Bo Chan"])
    ('person_name', None)
    >>> pii_kind_from_values([]) is None
    True
    """
    counts = Counter(c for v in values if (c := _countable(v)) is not None)
    seen = sum(counts.values())
    hits: Counter[str] = Counter()
    any_hits = 0
    for value, n in counts.items():
        kinds = kinds_in_value(value)
        if person and isinstance(value, str) and looks_like_person_name(value.strip()):
            kinds = kinds | {"person_name"}
        if kinds:
            any_hits += n
            hits.update(dict.fromkeys(kinds, n))
    if not seen or not hits:
        return None
    kind, top = max(hits.items(), key=lambda item: (item[1], item[0]))
    if top / seen >= min_ratio:
        return kind
    several = sum(1 for n in hits.values() if n / seen >= MIXED_KIND_RATIO) >= 2
    return "mixed" if several and any_hits / seen >= MIXED_RATIO else None
