"""PII detection by column name and by sampled values."""

from __future__ import annotations

import doctest

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nl2sql_assets.adapters import pii
from nl2sql_assets.adapters.pii import (
    iban_valid, luhn_valid, pii_kind_from_name, pii_kind_from_values, value_kind,
)


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
def test_card_numbers_need_luhn(digits: str) -> None:
    if value_kind(digits) == "card_number":
        assert luhn_valid(digits) and digits[0] in "3456"


@given(st.text(max_size=60))
def test_value_kind_never_fails(text: str) -> None:
    assert value_kind(text) in {None, "email", "phone", "national_id", "card_number", "iban", "ip_address"}
