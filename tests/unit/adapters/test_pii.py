"""PII detection by column name and by sampled values."""

from __future__ import annotations

import doctest
from decimal import Decimal

import duckdb
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from nl2sql_assets.adapters import pii
from nl2sql_assets.adapters.duckdb import DuckDBStatsBackend
from nl2sql_assets.adapters.pii import (
    card_brand, iban_valid, luhn_valid, pii_kind_from_name, pii_kind_from_values, value_kind,
)
from nl2sql_assets.adapters.stats import compute_statistics
from nl2sql_assets.adapters.structure import RawColumn, RawTable, build_tables


def test_doctests() -> None:
    assert doctest.testmod(pii).failed == 0


@pytest.mark.parametrize(("name", "family", "kind"), [
    ("email", "text", "email"), ("EmailAddress", "text", "email"), ("contact_email", "text", "email"),
    ("e_mail", "text", "email"), ("phone", "text", "phone"), ("mobile_number", "text", "phone"),
    ("telephone", "integer", "phone"), ("ssn", "text", "national_id"), ("tax_id", "text", "national_id"),
    ("national_insurance_number", "text", "national_id"), ("iban", "text", "iban"),
    ("bank_account_number", "text", "iban"), ("credit_card", "text", "card_number"),
    ("card_number", "integer", "card_number"), ("passport_no", "text", "passport"),
    ("drivers_license", "text", "driver_license"), ("ip_address", "text", "ip_address"),
    ("client_ip", "text", "ip_address"), ("date_of_birth", "date", "birth_date"), ("dob", "date", "birth_date"),
    ("first_name", "text", "person_name"), ("LastName", "text", "person_name"),
    ("customer_name", "text", "person_name"), ("street_address", "text", "address"),
    ("billing_address", "text", "address"), ("password_hash", "text", None), ("password", "text", "credential"),
    ("api_key", "text", "credential"),
])
def test_name_rules(name: str, family: str, kind: str | None) -> None:
    assert pii_kind_from_name(name, family) == kind


@pytest.mark.parametrize(("name", "family"), [
    ("email_verified", "boolean"), ("is_email", "boolean"), ("email_count", "integer"),
    ("email_status", "text"), ("phone_country_code", "text"), ("birth_country", "text"),
    ("product_name", "text"), ("name", "text"), ("status", "text"), ("created_at", "datetime"),
    ("ip_address", "integer"), ("email", "integer"), ("address_id", "integer"), ("zip", "text"),
    ("shipping_date", "date"), ("total", "decimal"), ("tip", "decimal"), ("mailing_list_id", "integer"),
])
def test_names_that_are_not_pii(name: str, family: str) -> None:
    assert pii_kind_from_name(name, family) is None


@pytest.mark.parametrize(("value", "kind"), [
    ("ann.lee+news@mail.example.co.uk", "email"), ("+1 (415) 555-0100", "phone"), ("415-555-0100", "phone"),
    ("030 1234567", "phone"), ("+44 20 7946 0958", "phone"), ("123-45-6789", "national_id"),
    ("4111-1111-1111-1111", "card_number"), ("378282246310005", "card_number"),
    ("DE89370400440532013000", "iban"), ("fr14 2004 1010 0505 0001 3m02 606".upper(), "iban"),
    ("10.0.0.255", "ip_address"), ("::1", "ip_address"), ("fe80::1ff:fe23:4567:890a", "ip_address"),
])
def test_value_kinds(value: str, kind: str) -> None:
    assert value_kind(value) == kind


@pytest.mark.parametrize("value", [
    "2024-01-15", "2024-01-15 10:00:00", "12:30", "SKU-123", "paid", "1234", "666-12-3456",
    "4111111111111112", "DE89370400440532013001", "999.1.1.1", "1.2.3", "hello world", "", "   ",
    "v1.2.3.4", "not@an", "@example.com",
])
def test_values_that_are_not_pii(value: str) -> None:
    assert value_kind(value) is None


def test_invalid_ssns_are_not_national_ids() -> None:
    assert value_kind("000-12-3456") != "national_id"  # it may still pass for a local phone number
    assert value_kind("123-00-4567") != "national_id"
    assert value_kind("900-12-3456") != "national_id"


def test_checksums() -> None:
    assert luhn_valid("79927398713") and not luhn_valid("79927398710")
    assert iban_valid("GB82 WEST 1234 5698 7654 32") and not iban_valid("GB82 WEST 1234 5698 7654 33")
    assert not iban_valid("GB82")


def test_values_need_a_majority() -> None:
    emails = ["a@example.com", "b@example.org", "c@example.net"]
    assert pii_kind_from_values(emails + ["x", "y"]) == "email"
    assert pii_kind_from_values(emails + ["w", "x", "y", "z"]) is None
    assert pii_kind_from_values(emails + [None, None, None, None, 42, b"\x00"]) == "email"
    assert pii_kind_from_values(["x"], min_ratio=0.0) is None  # nothing matched at all
    assert pii_kind_from_values([None, "", "  "]) is None


@given(st.text(alphabet="0123456789", min_size=13, max_size=19))
@example("8130000030345777")  # UnionPay 81, Luhn-valid: found by this test once
def test_card_numbers_need_luhn(digits: str) -> None:
    if value_kind(digits) == "card_number":
        # the issuer ranges' first digits (2: Mastercard, Mir; 8: UnionPay 81, RuPay 82)
        assert luhn_valid(digits) and card_brand(digits) is not None and digits[0] in "2345689"


@given(st.text(max_size=60))
def test_value_kind_never_fails(text: str) -> None:
    assert value_kind(text) in {None, "email", "phone", "national_id", "card_number", "iban", "ip_address"}


# --------------------------------------------------------------------------------------------
# issue 13, item 2: personal data in columns with innocent names
# --------------------------------------------------------------------------------------------
def _luhn_complete(body: str) -> str:
    return next(body + str(d) for d in range(10) if luhn_valid(body + str(d)))


# (first digits, length) of every major issuer range, with both ends of the ranges given as spans
CARD_RANGES = [
    ("4", 16), ("4", 13), ("4", 19), ("51", 16), ("55", 16), ("2221", 16), ("2500", 16), ("2720", 16),
    ("34", 15), ("37", 15), ("6011", 16), ("644", 16), ("649", 16), ("65", 16), ("3528", 16), ("3589", 16),
    ("36", 14), ("38", 16), ("300", 14), ("305", 16), ("62", 16), ("62", 19), ("50", 16), ("5018", 16),
    ("6759", 19), ("2200", 16), ("9792", 16),
]


def test_every_major_card_range_is_a_card_number_with_luhn() -> None:
    for prefix, length in CARD_RANGES:
        number = _luhn_complete(prefix + "0" * (length - len(prefix) - 1))
        spaced = " ".join(number[i:i + 4] for i in range(0, len(number), 4))
        assert value_kind(number) == "card_number", (prefix, length)
        assert value_kind(spaced) == "card_number", (prefix, length)
        last = str((int(number[-1]) + 1) % 10)
        assert value_kind(number[:-1] + last) is None, (prefix, length)  # Luhn fails
    assert value_kind("2720999999999996") == "card_number" and value_kind("2221000000000009") == "card_number"
    outside = [_luhn_complete("272100000000000"), _luhn_complete("222099999999999")]  # just outside 2221-2720
    assert [luhn_valid(n) and value_kind(n) for n in outside] == [None, None]
    assert value_kind("1234567812345670") is None  # Luhn-valid, but no issuer range starts with 1


def test_card_numbers_stored_as_numbers() -> None:
    cards = [int(_luhn_complete(p + str(i).zfill(15 - len(p)))) for i, p in enumerate(["4", "2221", "51", "6011"] * 5)]
    assert all(value_kind(str(c)) == "card_number" for c in cards)
    assert pii_kind_from_values(cards) == "card_number"
    assert pii_kind_from_values([Decimal(c) for c in cards]) == "card_number"
    assert pii_kind_from_values([float(c) for c in cards[:4] if c < 2**53]) == "card_number"
    ids = list(range(10**15, 10**15 + 200))  # long ids: one in ten passes Luhn, none of them a card range
    assert pii_kind_from_values(ids) is None and pii_kind_from_values([1, 2, 3, 42, 10**12 - 1]) is None


def test_personal_data_inside_free_text() -> None:
    assert pii_kind_from_values([f"call +1 415 555 {i:04d} after 6pm" for i in range(10)]) == "phone"
    assert pii_kind_from_values([f"mobile: (212) 555-{i:04d}, evenings" for i in range(10)]) == "phone"
    assert pii_kind_from_values([f"Customer wrote from ann.{i}@example.com about order {i}" for i in range(10)]) == "email"
    assert pii_kind_from_values([f"paid with 5555 5555 5555 4444 on 2024-05-0{i}" for i in range(1, 9)]) == "card_number"
    assert pii_kind_from_values(["refund to DE89 3704 0044 0532 0130 00 please"] * 3) == "iban"
    assert pii_kind_from_values([f"login from 10.0.{i}.7 at 10:30" for i in range(9)]) == "ip_address"
    innocent = ["Widget 3 packed for order 10293847 on 2024-05-01 10:30:00", "12.5 kg, 3 boxes, version 1.2.3",
                "ISBN 978-3-16-148410-0", "550e8400-e29b-41d4-a716-446655440000", "Q3 2023 revenue up 12%",
                "EAN 4006381333931", "lat 52.520008 lon 13.404954", "1999-2005", "Ticket #10293 closed",
                "v1.2.3.4 released", "SKU-123456789", "Population 8 336 817 (2019)"]
    assert pii_kind_from_values(innocent * 5) is None
    assert [v for v in innocent if pii.kinds_in_text(v)] == []


def test_mixed_columns_count_as_personal_data() -> None:
    values = ([f"mail ann.{i}@example.com" for i in range(30)] + [f"call 555-123-{i:04d}" for i in range(30)]
              + [f"Widget {i} shipped" for i in range(40)])
    assert pii_kind_from_values(values) == "mixed"  # each kind 30 %, together 60 %
    assert pii_kind_from_values(values[:15] + values[30:45] + values[60:]) == "mixed"  # 15 % + 15 % of 70
    assert pii_kind_from_values(values[:10] + values[60:]) is None  # one kind, 20 %: not a majority


def test_the_whole_sample_is_probed_not_its_first_rows() -> None:
    """E-mails only after row 500: the probe reads the rows min and max come from."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT CASE WHEN i < 500 THEN 'ok' ELSE 'ann.' || i || '@example.com' END AS remarks "
                "FROM range(1500) r(i)")
    tables = build_tables([RawTable("main", "t", "table", None, [RawColumn("remarks", "VARCHAR")])])
    out, _ = compute_statistics(tables, DuckDBStatsBackend(con), budget_s=60)
    remarks = out[0].column("remarks")
    assert remarks is not None and remarks.pii_kind == "email"
    assert remarks.stats is not None and remarks.stats.min_value is None and remarks.stats.max_value is None
    con.close()


def test_person_names_need_their_shape_and_a_column_named_for_a_person() -> None:
    names = ["Ann Lee", "Bob Baker", "María José García", "Sean O'Neil", "Jean-Luc Picard", "Anna K. Smith",
             "Ludwig van Beethoven", "Hiro Tanaka"] * 5
    assert pii_kind_from_values(names, person=True) == "person_name"
    assert pii_kind_from_values(names + ["n/a"] * 10, person=True) == "person_name"
    assert pii_kind_from_values(names) is None  # no column hint: a list of names may be cities, teams...
    innocent = ["Widget 3", "retail", "wholesale", "New York City", "Acme Corp", "Sales Team", "NEW YORK",
                "ann lee", "Berlin", "Home & Garden", "Main Street"]
    assert pii_kind_from_values(innocent * 5, person=True) is None
    assert [n for n in ("owner", "account_holder", "cardholder", "contact", "assignee", "created_by",
                        "OwnerDisplayName", "emergency_contact") if not pii.person_hint(n)] == []
    assert [n for n in ("city", "category", "product_name", "title", "team", "name", "by") if pii.person_hint(n)] == []


def test_recorded_values_are_checked_one_by_one() -> None:
    assert pii.recorded_value_kind("zz: reach me at zed@example.org") == "email"
    assert pii.recorded_value_kind("4111111111111111") == "card_number"
    assert pii.recorded_value_kind("Ann Lee", "owner") == "person_name"
    assert pii.recorded_value_kind("Ann Lee", "city") is None and pii.recorded_value_kind("Widget 3", "owner") is None


def test_columns_the_budget_leaves_unchecked_record_no_value() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT 'item ' || i AS a, 'note ' || i AS b FROM range(50) r(i)")
    tables = build_tables([RawTable("main", "t", "table", None, [RawColumn("a", "VARCHAR"), RawColumn("b", "VARCHAR")])])
    ticks = iter(range(100))
    out, _ = compute_statistics(tables, DuckDBStatsBackend(con), budget_s=4, clock=lambda: float(next(ticks)))
    a, b = out[0].column("a").stats, out[0].column("b").stats  # type: ignore[union-attr]
    assert a is not None and a.min_value == "item 0"  # checked in time: recorded
    assert b is not None and b.min_value is None and b.max_value is None and b.top_values == []
    assert "time budget" in (b.note or "") and b.distinct_count == 50
    con.close()
