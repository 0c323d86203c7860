"""The bundled demo: realistic datasources to index and query without any setup.

:func:`create_demo` writes three small databases under ``<home>/demo/`` and a datasources file
naming them (contract.md's format):

- ``commerce`` (DuckDB, tenant ``acme``): a web shop with customers, orders, payments,
  shipments, returns, inventory, ... documented with ``COMMENT ON`` in the database.
- ``hr`` (SQLite, tenant ``acme``): people operations: employees (with a manager hierarchy),
  departments, salaries, payroll, time off, reviews, projects, training. SQLite has no
  comments, so its data dictionary travels as ``annotations`` in the datasources file.
- ``support`` (SQLite, tenant ``globex``): a help desk in another tenant, so that tenant
  isolation can be shown.

Rows are generated deterministically (``random.Random`` with a fixed seed and a fixed
anchor date), so two machines build byte-for-byte the same data. The schema exercises what
matters for retrieval: composite keys and a composite foreign key, a table with two foreign
keys to the same table, self-references, views, and PII columns (e-mail, phone, IBAN,
national id, IP address) holding realistic values.
"""

from __future__ import annotations

import csv
import logging
import os
import random
import sqlite3
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

import yaml

logger = logging.getLogger(__name__)

DEMO_SEED = 20251231
#: Every generated date lies before this day, so the data never depends on the clock.
ANCHOR = date(2025, 12, 31)
DEMO_DATASOURCE_IDS = ("commerce", "hr", "support")

Row = tuple[object, ...]


@dataclass(frozen=True)
class DemoQuestion:
    """A question the demo can answer, with the datasource and tables a good retriever finds."""

    question: str
    datasource: str
    tables: tuple[str, ...]


#: Sample questions printed by ``nl2sql-assets demo`` and usable as a tiny retrieval check.
DEMO_QUESTIONS: tuple[DemoQuestion, ...] = (
    DemoQuestion("What was the revenue per month in 2025?", "commerce", ("orders",)),
    DemoQuestion("Which products were returned most often and why?", "commerce",
                 ("returns", "order_items", "products")),
    DemoQuestion("How much stock of each product is left in the Rotterdam warehouse?", "commerce",
                 ("inventory", "warehouses", "products")),
    DemoQuestion("Average product rating per category", "commerce", ("reviews", "products", "categories")),
    DemoQuestion("Who reports to the head of engineering?", "hr", ("employees", "departments")),
    DemoQuestion("Total payroll cost per department last quarter", "hr",
                 ("payslips", "payroll_runs", "employees", "departments")),
    DemoQuestion("How many vacation days did each employee take in 2025?", "hr", ("time_off_requests", "employees")),
    DemoQuestion("Which tickets breached their first-response SLA?", "support", ("tickets", "sla_policies")),
    DemoQuestion("Average customer satisfaction score per support agent", "support",
                 ("satisfaction_surveys", "tickets", "agents")),
)


# --------------------------------------------------------------------------------------------
# Schema as data: one spec per table, rendered as DDL for DuckDB and SQLite alike.


@dataclass(frozen=True)
class _Col:
    name: str
    type: str
    extra: str = ""
    doc: str = ""


@dataclass(frozen=True)
class _Table:
    name: str
    doc: str
    columns: tuple[_Col, ...]
    constraints: tuple[str, ...] = ()

    def ddl(self) -> str:
        parts = [f"{c.name} {c.type} {c.extra}".rstrip() for c in self.columns]
        parts.extend(self.constraints)
        return f"CREATE TABLE {self.name} (\n    " + ",\n    ".join(parts) + "\n)"

    def insert_sql(self, rows: int = 1) -> str:
        marks = "(" + ", ".join("?" for _ in self.columns) + ")"
        names = ", ".join(c.name for c in self.columns)
        return f"INSERT INTO {self.name} ({names}) VALUES " + ", ".join(marks for _ in range(rows))


@dataclass(frozen=True)
class _View:
    name: str
    doc: str
    sql: str


@dataclass
class _Dataset:
    tables: list[_Table]
    views: list[_View]
    rows: dict[str, list[Row]] = field(default_factory=dict)


def C(name: str, type_: str, extra: str = "", doc: str = "") -> _Col:  # noqa: N802 - reads like DDL
    return _Col(name, type_, extra, doc)


PK = "PRIMARY KEY"
NN = "NOT NULL"


def _ref(table: str, column: str, nullable: bool = False) -> str:
    return ("" if nullable else "NOT NULL ") + f"REFERENCES {table}({column})"


# --------------------------------------------------------------------------------------------
# Vocabulary for realistic values.

_FIRST = ("Anna", "Ben", "Chloe", "David", "Elena", "Felix", "Grace", "Hugo", "Ines", "Jonas",
          "Karin", "Liam", "Mia", "Noah", "Olivia", "Pablo", "Quinn", "Rosa", "Samir", "Tara",
          "Umar", "Vera", "Wen", "Ximena", "Yusuf", "Zoe", "Amelie", "Bruno", "Clara", "Dmitri",
          "Emma", "Farah", "Georg", "Hannah", "Ivan", "Julia", "Kenji", "Lena", "Marco", "Nora")
_LAST = ("Schmidt", "Müller", "Garcia", "Smith", "Johnson", "Rossi", "Dubois", "Novak", "Kowalski",
         "Jansen", "Andersen", "Silva", "Nguyen", "Kim", "Patel", "Okafor", "Cohen", "Ivanova",
         "Larsen", "Moreau", "Fischer", "Weber", "Brown", "Taylor", "Wilson", "Martin", "Lopez",
         "Bianchi", "Horvat", "Yilmaz", "Tanaka", "Murphy", "O'Brien", "Costa", "Virtanen")
_MAIL_DOMAINS = ("example.com", "mail.example.org", "inbox.example.net", "post.example.de")
_COUNTRIES = (("DE", "Berlin", "10115", "+49 30"), ("DE", "Hamburg", "20095", "+49 40"),
              ("NL", "Rotterdam", "3011", "+31 10"), ("FR", "Lyon", "69001", "+33 4"),
              ("US", "Chicago", "60601", "+1 312"), ("US", "Austin", "73301", "+1 512"),
              ("GB", "Manchester", "M1 1AE", "+44 161"), ("ES", "Valencia", "46001", "+34 96"))
_STREETS = ("Hauptstraße", "Market Street", "Rue de la Paix", "Keizersgracht", "Calle Mayor",
            "Oak Avenue", "Lindenweg", "High Street", "Baker Street", "Elm Road")


def _person(rng: random.Random) -> tuple[str, str]:
    return rng.choice(_FIRST), rng.choice(_LAST)


def _email(first: str, last: str, n: int, domain: str | None = None, rng: random.Random | None = None) -> str:
    local = f"{first}.{last}".lower().replace("'", "").replace("ü", "ue")
    dom = domain or (rng.choice(_MAIL_DOMAINS) if rng else _MAIL_DOMAINS[0])
    return f"{local}{n}@{dom}"


def _phone(rng: random.Random, prefix: str) -> str:
    return f"{prefix} {rng.randint(200, 989)} {rng.randint(1000, 9999)}"


def _iban_de(rng: random.Random) -> str:
    """A German IBAN with a valid mod-97 check (DE = 13 14).

    >>> _iban_de(random.Random(1))[:2]
    'DE'
    """
    bban = f"{rng.randint(10000000, 99999999)}{rng.randint(0, 9_999_999_999):010d}"
    check = 98 - int(bban + "131400") % 97
    return f"DE{check:02d}{bban}"


def _ssn(rng: random.Random) -> str:
    return f"{rng.randint(100, 665):03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"


def _ip(rng: random.Random) -> str:
    net = rng.choice(("203.0.113", "198.51.100", "192.0.2", "100.64.12"))
    return f"{net}.{rng.randint(1, 254)}"


def _day(rng: random.Random, start: date, end: date) -> date:
    return start + timedelta(days=rng.randint(0, max(0, (end - start).days)))


def _moment(rng: random.Random, start: date, end: date) -> datetime:
    d = _day(rng, start, end)
    return datetime(d.year, d.month, d.day, rng.randint(7, 22), rng.randint(0, 59), rng.randint(0, 59))


def _money(x: float) -> float:
    return round(x + 1e-9, 2)


def _weighted(rng: random.Random, choices: Sequence[tuple[str, int]]) -> str:
    return rng.choices([c for c, _ in choices], weights=[w for _, w in choices])[0]


# --------------------------------------------------------------------------------------------
# commerce (DuckDB)


def _commerce_tables() -> list[_Table]:
    return [
        _Table("categories", "Product categories, two levels deep (department and category)", (
            C("category_id", "INTEGER", PK),
            C("parent_category_id", "INTEGER", _ref("categories", "category_id", nullable=True),
              "The parent department; NULL for top-level departments"),
            C("name", "VARCHAR", NN, "Category name as shown in the shop"),
            C("slug", "VARCHAR", f"{NN} UNIQUE", "URL-friendly name"),
        )),
        _Table("suppliers", "Vendors we buy products from", (
            C("supplier_id", "INTEGER", PK),
            C("company_name", "VARCHAR", NN),
            C("contact_name", "VARCHAR", "", "Account manager at the supplier"),
            C("contact_email", "VARCHAR", "", "E-mail of the account manager"),
            C("phone", "VARCHAR", "", "Supplier phone number"),
            C("country", "VARCHAR(2)", NN, "ISO 3166 country code"),
            C("lead_time_days", "INTEGER", "", "Usual days from purchase order to delivery"),
        )),
        _Table("products", "The product catalogue: every item the shop sells", (
            C("product_id", "INTEGER", PK),
            C("sku", "VARCHAR", f"{NN} UNIQUE", "Stock keeping unit"),
            C("name", "VARCHAR", NN, "Product name"),
            C("category_id", "INTEGER", _ref("categories", "category_id")),
            C("supplier_id", "INTEGER", _ref("suppliers", "supplier_id")),
            C("unit_price", "DECIMAL(10,2)", NN, "Current list price in EUR, including VAT"),
            C("cost_price", "DECIMAL(10,2)", NN, "Purchase price paid to the supplier"),
            C("weight_kg", "DECIMAL(8,3)", "", "Shipping weight in kilograms"),
            C("is_active", "BOOLEAN", NN, "False once the product is discontinued"),
            C("created_at", "TIMESTAMP", NN, "When the product was listed"),
        )),
        _Table("warehouses", "Fulfilment centres that hold stock and ship orders", (
            C("warehouse_id", "INTEGER", PK),
            C("code", "VARCHAR", f"{NN} UNIQUE", "Short code such as BER1"),
            C("city", "VARCHAR", NN),
            C("country", "VARCHAR(2)", NN),
            C("capacity_units", "INTEGER", "", "Storage capacity in pallet units"),
        )),
        _Table("inventory", "Stock on hand per product and warehouse", (
            C("product_id", "INTEGER", _ref("products", "product_id")),
            C("warehouse_id", "INTEGER", _ref("warehouses", "warehouse_id")),
            C("quantity_on_hand", "INTEGER", NN, "Units physically in stock"),
            C("reorder_level", "INTEGER", NN, "Reorder when stock falls below this"),
            C("updated_at", "TIMESTAMP", NN),
        ), ("PRIMARY KEY (product_id, warehouse_id)",)),
        _Table("customers", "Registered shop customers", (
            C("customer_id", "INTEGER", PK),
            C("first_name", "VARCHAR", NN),
            C("last_name", "VARCHAR", NN),
            C("email", "VARCHAR", f"{NN} UNIQUE", "Login and contact e-mail address"),
            C("phone", "VARCHAR", "", "Mobile phone number"),
            C("date_of_birth", "DATE"),
            C("loyalty_tier", "VARCHAR", NN, "bronze, silver, gold or platinum"),
            C("marketing_opt_in", "BOOLEAN", NN, "Consented to newsletters"),
            C("created_at", "TIMESTAMP", NN, "Sign-up time"),
        )),
        _Table("addresses", "Postal addresses of customers, used for shipping and billing", (
            C("address_id", "INTEGER", PK),
            C("customer_id", "INTEGER", _ref("customers", "customer_id")),
            C("street", "VARCHAR", NN),
            C("city", "VARCHAR", NN),
            C("postal_code", "VARCHAR", NN),
            C("country", "VARCHAR(2)", NN),
            C("is_default", "BOOLEAN", NN),
        )),
        _Table("coupons", "Discount codes customers can redeem at checkout", (
            C("coupon_id", "INTEGER", PK),
            C("code", "VARCHAR", f"{NN} UNIQUE", "The code typed at checkout"),
            C("discount_percent", "INTEGER", NN),
            C("valid_from", "DATE", NN),
            C("valid_to", "DATE", NN),
            C("max_uses", "INTEGER"),
        )),
        _Table("orders", "Customer orders (one row per checkout)", (
            C("order_id", "INTEGER", PK),
            C("customer_id", "INTEGER", _ref("customers", "customer_id")),
            C("shipping_address_id", "INTEGER", _ref("addresses", "address_id"), "Where the order is delivered"),
            C("billing_address_id", "INTEGER", _ref("addresses", "address_id"), "Address on the invoice"),
            C("coupon_id", "INTEGER", _ref("coupons", "coupon_id", nullable=True), "Redeemed coupon, if any"),
            C("status", "VARCHAR", NN, "pending, paid, shipped, delivered or cancelled"),
            C("ordered_at", "TIMESTAMP", NN, "Checkout time"),
            C("subtotal", "DECIMAL(12,2)", NN, "Sum of the line totals"),
            C("discount_amount", "DECIMAL(12,2)", NN),
            C("shipping_fee", "DECIMAL(12,2)", NN),
            C("total", "DECIMAL(12,2)", NN, "Amount charged: subtotal - discount + shipping"),
            C("currency", "VARCHAR(3)", NN),
        )),
        _Table("order_items", "Order lines: which product, how many, at what price", (
            C("order_id", "INTEGER", _ref("orders", "order_id")),
            C("line_no", "INTEGER", NN, "Position of the line within the order"),
            C("product_id", "INTEGER", _ref("products", "product_id")),
            C("quantity", "INTEGER", NN),
            C("unit_price", "DECIMAL(10,2)", NN, "Price per unit at the time of the order"),
            C("line_total", "DECIMAL(12,2)", NN),
        ), ("PRIMARY KEY (order_id, line_no)",)),
        _Table("payments", "Payment transactions for orders", (
            C("payment_id", "INTEGER", PK),
            C("order_id", "INTEGER", _ref("orders", "order_id")),
            C("method", "VARCHAR", NN, "card, paypal, invoice or bank_transfer"),
            C("amount", "DECIMAL(12,2)", NN),
            C("status", "VARCHAR", NN, "captured, refunded or failed"),
            C("card_last4", "VARCHAR(4)", "", "Last four digits of the card, card payments only"),
            C("client_ip", "VARCHAR", "", "IP address the payment was made from"),
            C("paid_at", "TIMESTAMP", NN),
        )),
        _Table("shipments", "Parcels sent to customers", (
            C("shipment_id", "INTEGER", PK),
            C("order_id", "INTEGER", _ref("orders", "order_id")),
            C("warehouse_id", "INTEGER", _ref("warehouses", "warehouse_id"), "Warehouse that shipped it"),
            C("carrier", "VARCHAR", NN, "DHL, UPS, PostNL or FedEx"),
            C("tracking_number", "VARCHAR", NN),
            C("shipped_at", "TIMESTAMP", NN),
            C("delivered_at", "TIMESTAMP", "", "NULL while in transit"),
        )),
        _Table("returns", "Returned order lines and their refunds", (
            C("return_id", "INTEGER", PK),
            C("order_id", "INTEGER", NN),
            C("line_no", "INTEGER", NN),
            C("quantity", "INTEGER", NN),
            C("reason", "VARCHAR", NN, "damaged, wrong_size, not_as_described, changed_mind or late_delivery"),
            C("refund_amount", "DECIMAL(12,2)", NN),
            C("status", "VARCHAR", NN, "requested, approved, refunded or rejected"),
            C("requested_at", "TIMESTAMP", NN),
        ), ("FOREIGN KEY (order_id, line_no) REFERENCES order_items(order_id, line_no)",)),
        _Table("reviews", "Product ratings and reviews written by customers", (
            C("review_id", "INTEGER", PK),
            C("product_id", "INTEGER", _ref("products", "product_id")),
            C("customer_id", "INTEGER", _ref("customers", "customer_id")),
            C("rating", "SMALLINT", NN, "1 to 5 stars"),
            C("title", "VARCHAR"),
            C("body", "VARCHAR"),
            C("created_at", "TIMESTAMP", NN),
        )),
        _Table("carts", "Shopping carts, including abandoned ones", (
            C("cart_id", "INTEGER", PK),
            C("customer_id", "INTEGER", _ref("customers", "customer_id")),
            C("status", "VARCHAR", NN, "open, converted or abandoned"),
            C("created_at", "TIMESTAMP", NN),
            C("updated_at", "TIMESTAMP", NN),
        )),
        _Table("cart_items", "Products sitting in a cart", (
            C("cart_id", "INTEGER", _ref("carts", "cart_id")),
            C("product_id", "INTEGER", _ref("products", "product_id")),
            C("quantity", "INTEGER", NN),
            C("added_at", "TIMESTAMP", NN),
        ), ("PRIMARY KEY (cart_id, product_id)",)),
    ]


_CATALOGUE = {  # department -> category -> (product noun, price range)
    "Electronics": {"Headphones": ("Headphones", (29, 349)), "Laptops": ("Laptop", (499, 2499)),
                    "Smartphones": ("Smartphone", (199, 1299)), "Cameras": ("Camera", (149, 1899))},
    "Home & Kitchen": {"Coffee Machines": ("Coffee Machine", (49, 899)), "Cookware": ("Pan Set", (19, 299)),
                       "Bedding": ("Duvet", (25, 240))},
    "Sports & Outdoors": {"Running Shoes": ("Running Shoes", (59, 199)), "Tents": ("Tent", (89, 699)),
                          "Bicycles": ("Bicycle", (299, 2999))},
    "Books": {"Fiction": ("Novel", (8, 30)), "Cookbooks": ("Cookbook", (12, 45)),
              "Travel Guides": ("Travel Guide", (10, 35))},
    "Fashion": {"Jackets": ("Jacket", (49, 499)), "Sneakers": ("Sneakers", (39, 229)),
                "Watches": ("Watch", (59, 999))},
    "Toys": {"Board Games": ("Board Game", (15, 89)), "Building Sets": ("Building Set", (19, 299))},
}
_BRANDS = ("Nordlicht", "Acme", "Vela", "Kestrel", "Orbis", "Fjord", "Lumen", "Tandem", "Corvo", "Mistral")
_MODELS = ("Pro", "Air", "Classic", "Sport", "Mini", "Max", "Lite", "One", "Trail", "Studio")


def _commerce_rows(rng: random.Random) -> dict[str, list[Row]]:
    rows: dict[str, list[Row]] = {}
    start, end = date(2024, 1, 1), ANCHOR

    categories: list[Row] = []
    leaf: list[tuple[int, str, tuple[int, int]]] = []
    for dept, subs in _CATALOGUE.items():
        dept_id = len(categories) + 1
        categories.append((dept_id, None, dept, dept.lower().replace(" & ", "-").replace(" ", "-")))
        for sub, (noun, price_range) in subs.items():
            cid = len(categories) + 1
            categories.append((cid, dept_id, sub, sub.lower().replace(" ", "-")))
            leaf.append((cid, noun, price_range))
    rows["categories"] = categories

    suppliers: list[Row] = []
    for i in range(1, 21):
        country = rng.choice(_COUNTRIES)
        first, last = _person(rng)
        company = f"{rng.choice(_BRANDS)} {rng.choice(('Trading', 'Supply', 'Goods', 'Wholesale'))} " \
                  f"{rng.choice(('GmbH', 'B.V.', 'Ltd', 'Inc.', 'S.L.'))}"
        suppliers.append((i, company, f"{first} {last}", _email(first, last, i, f"supplier{i}.example.com"),
                          _phone(rng, country[3]), country[0], rng.randint(2, 30)))
    rows["suppliers"] = suppliers

    products: list[Row] = []
    prices: dict[int, float] = {}
    for pid in range(1, 201):
        cid, noun, (lo, hi) = leaf[(pid - 1) % len(leaf)]
        price = _money(rng.uniform(lo, hi))
        prices[pid] = price
        name = f"{rng.choice(_BRANDS)} {rng.choice(_MODELS)} {noun}"
        products.append((pid, f"SKU-{pid:05d}", name, cid, rng.randint(1, 20), price,
                         _money(price * rng.uniform(0.45, 0.75)), round(rng.uniform(0.1, 18.0), 3),
                         rng.random() > 0.08, _moment(rng, date(2022, 1, 1), date(2024, 6, 30))))
    rows["products"] = products

    rows["warehouses"] = [(1, "BER1", "Berlin", "DE", 12000), (2, "RTM1", "Rotterdam", "NL", 18000),
                          (3, "CHI1", "Chicago", "US", 15000), (4, "DAL1", "Dallas", "US", 9000)]
    rows["inventory"] = [
        (pid, wid, rng.randint(0, 400), rng.choice((10, 20, 25, 50)), _moment(rng, date(2025, 11, 1), end))
        for pid in range(1, 201) for wid in range(1, 5) if rng.random() < 0.8
    ]

    customers: list[Row] = []
    addresses: list[Row] = []
    cust_addresses: dict[int, list[int]] = {}
    for cid in range(1, 501):
        first, last = _person(rng)
        country = rng.choice(_COUNTRIES)
        customers.append((cid, first, last, _email(first, last, cid, rng=rng), _phone(rng, country[3]),
                          _day(rng, date(1950, 1, 1), date(2006, 12, 31)),
                          _weighted(rng, (("bronze", 55), ("silver", 25), ("gold", 15), ("platinum", 5))),
                          rng.random() < 0.4, _moment(rng, date(2021, 1, 1), date(2025, 6, 30))))
        for k in range(1 + (rng.random() < 0.45)):
            aid = len(addresses) + 1
            addresses.append((aid, cid, f"{rng.choice(_STREETS)} {rng.randint(1, 180)}", country[1],
                              country[2], country[0], k == 0))
            cust_addresses.setdefault(cid, []).append(aid)
    rows["customers"], rows["addresses"] = customers, addresses

    coupons: list[Row] = []
    for i in range(1, 13):
        valid_from = _day(rng, date(2024, 1, 1), date(2025, 9, 30))
        coupons.append((i, f"{rng.choice(('SPRING', 'SUMMER', 'WELCOME', 'VIP', 'FLASH', 'BLACKFRIDAY'))}{i:02d}",
                        rng.choice((5, 10, 15, 20, 25)), valid_from, valid_from + timedelta(days=rng.randint(14, 90)),
                        rng.choice((None, 100, 500, 1000))))
    rows["coupons"] = coupons

    orders: list[Row] = []
    items: list[Row] = []
    payments: list[Row] = []
    shipments: list[Row] = []
    returns: list[Row] = []
    for oid in range(1, 1501):
        cid = rng.randint(1, 500)
        ship = rng.choice(cust_addresses[cid])
        bill = cust_addresses[cid][0]
        status = _weighted(rng, (("delivered", 62), ("shipped", 12), ("paid", 10), ("pending", 6), ("cancelled", 10)))
        ordered_at = _moment(rng, start, end - timedelta(days=3))
        coupon = rng.randint(1, 12) if rng.random() < 0.15 else None
        subtotal = 0.0
        lines = []
        for line_no, pid in enumerate(rng.sample(range(1, 201), rng.randint(1, 4)), start=1):
            qty = rng.choice((1, 1, 1, 2, 2, 3))
            line_total = _money(prices[pid] * qty)
            subtotal += line_total
            lines.append((oid, line_no, pid, qty, prices[pid], line_total))
        items.extend(lines)
        subtotal = _money(subtotal)
        discount = _money(subtotal * next(c[2] for c in coupons if c[0] == coupon) / 100) if coupon else 0.0
        fee = 0.0 if subtotal >= 50 else 4.95
        total = _money(subtotal - discount + fee)
        orders.append((oid, cid, ship, bill, coupon, status, ordered_at, subtotal, discount, fee, total, "EUR"))
        if status != "pending":
            method = _weighted(rng, (("card", 55), ("paypal", 30), ("invoice", 10), ("bank_transfer", 5)))
            pay_status = "failed" if status == "cancelled" else "captured"
            payments.append((len(payments) + 1, oid, method, total, pay_status,
                             f"{rng.randint(0, 9999):04d}" if method == "card" else None, _ip(rng),
                             ordered_at + timedelta(minutes=rng.randint(1, 30))))
        if status in ("shipped", "delivered"):
            shipped_at = ordered_at + timedelta(hours=rng.randint(6, 72))
            delivered = shipped_at + timedelta(hours=rng.randint(20, 140)) if status == "delivered" else None
            carrier = rng.choice(("DHL", "UPS", "PostNL", "FedEx"))
            shipments.append((len(shipments) + 1, oid, rng.randint(1, 4), carrier,
                              f"{carrier[:2].upper()}{rng.randint(10**9, 10**10 - 1)}", shipped_at, delivered))
            if status == "delivered" and delivered is not None:
                for line in lines:
                    if rng.random() < 0.05:
                        refund = _money(line[4] * line[3])
                        returns.append((len(returns) + 1, oid, line[1], line[3],
                                        _weighted(rng, (("damaged", 15), ("wrong_size", 30), ("not_as_described", 20),
                                                        ("changed_mind", 30), ("late_delivery", 5))),
                                        refund, _weighted(rng, (("refunded", 70), ("approved", 15),
                                                                ("requested", 10), ("rejected", 5))),
                                        delivered + timedelta(days=rng.randint(1, 25))))
    rows.update(orders=orders, order_items=items, payments=payments, shipments=shipments, returns=returns)

    titles = {1: "Disappointing", 2: "Not great", 3: "Okay", 4: "Good value", 5: "Excellent"}
    rows["reviews"] = [
        (rid, rng.randint(1, 200), rng.randint(1, 500), (r := rng.choices((1, 2, 3, 4, 5), (5, 7, 15, 35, 38))[0]),
         titles[r], rng.choice(("Arrived quickly.", "Would buy again.", "Quality could be better.",
                                "Exactly as described.", "Stopped working after a month.", None)),
         _moment(rng, start, end))
        for rid in range(1, 601)
    ]
    carts: list[Row] = []
    cart_items: list[Row] = []
    for cart_id in range(1, 301):
        created = _moment(rng, date(2025, 1, 1), end)
        carts.append((cart_id, rng.randint(1, 500),
                      _weighted(rng, (("abandoned", 55), ("converted", 30), ("open", 15))),
                      created, created + timedelta(minutes=rng.randint(1, 600))))
        for pid in rng.sample(range(1, 201), rng.randint(1, 4)):
            cart_items.append((cart_id, pid, rng.randint(1, 3), created + timedelta(minutes=rng.randint(0, 60))))
    rows["carts"], rows["cart_items"] = carts, cart_items
    return rows


_COMMERCE_VIEWS = [
    _View("monthly_revenue", "Revenue and order count per calendar month (paid, shipped and delivered orders)",
          "CREATE VIEW monthly_revenue AS SELECT date_trunc('month', ordered_at) AS month, "
          "count(*) AS order_count, sum(total) AS revenue FROM orders "
          "WHERE status IN ('paid', 'shipped', 'delivered') GROUP BY 1"),
]


# --------------------------------------------------------------------------------------------
# hr (SQLite)


def _hr_tables() -> list[_Table]:
    return [
        _Table("offices", "Company offices and their locations", (
            C("office_id", "INTEGER", PK),
            C("name", "VARCHAR(80)", NN),
            C("city", "VARCHAR(80)", NN),
            C("country", "VARCHAR(2)", NN, "ISO 3166 country code"),
            C("timezone", "VARCHAR(40)", NN),
        )),
        _Table("departments", "Organisational units; sub-departments point to their parent", (
            C("department_id", "INTEGER", PK),
            C("name", "VARCHAR(80)", f"{NN} UNIQUE"),
            C("parent_department_id", "INTEGER", _ref("departments", "department_id", nullable=True),
              "Parent unit; NULL for top-level departments"),
            C("office_id", "INTEGER", _ref("offices", "office_id"), "Main office of the department"),
            C("cost_center", "VARCHAR(10)", NN, "Finance cost centre code"),
        )),
        _Table("positions", "Job titles with their salary band", (
            C("position_id", "INTEGER", PK),
            C("title", "VARCHAR(80)", NN),
            C("job_family", "VARCHAR(40)", NN, "engineering, sales, finance, people, operations, ..."),
            C("grade", "INTEGER", NN, "Seniority grade 1 (entry) to 7 (executive)"),
            C("min_salary", "DECIMAL(12,2)", NN, "Lower bound of the annual salary band"),
            C("max_salary", "DECIMAL(12,2)", NN, "Upper bound of the annual salary band"),
        )),
        _Table("employees", "Everyone employed by the company, current and former", (
            C("employee_id", "INTEGER", PK),
            C("first_name", "VARCHAR(60)", NN),
            C("last_name", "VARCHAR(60)", NN),
            C("work_email", "VARCHAR(120)", f"{NN} UNIQUE"),
            C("personal_email", "VARCHAR(120)"),
            C("phone", "VARCHAR(30)"),
            C("national_id", "VARCHAR(20)", "", "Social security number"),
            C("iban", "VARCHAR(34)", "", "Bank account for salary payments"),
            C("date_of_birth", "DATE"),
            C("hire_date", "DATE", NN),
            C("termination_date", "DATE", "", "Last working day; NULL while employed"),
            C("department_id", "INTEGER", _ref("departments", "department_id")),
            C("position_id", "INTEGER", _ref("positions", "position_id")),
            C("manager_id", "INTEGER", _ref("employees", "employee_id", nullable=True),
              "Direct manager; NULL for the CEO"),
            C("office_id", "INTEGER", _ref("offices", "office_id")),
            C("employment_type", "VARCHAR(20)", NN, "full_time, part_time or contractor"),
            C("status", "VARCHAR(20)", NN, "active, on_leave or terminated"),
        )),
        _Table("salaries", "Salary history: one row per pay change", (
            C("salary_id", "INTEGER", PK),
            C("employee_id", "INTEGER", _ref("employees", "employee_id")),
            C("annual_amount", "DECIMAL(12,2)", NN, "Gross annual base salary"),
            C("currency", "VARCHAR(3)", NN),
            C("effective_from", "DATE", NN),
            C("effective_to", "DATE", "", "NULL for the current salary"),
        )),
        _Table("payroll_runs", "Monthly payroll runs", (
            C("payroll_run_id", "INTEGER", PK),
            C("period_start", "DATE", NN),
            C("period_end", "DATE", NN),
            C("paid_on", "DATE", NN),
            C("status", "VARCHAR(20)", NN, "draft, approved or paid"),
        )),
        _Table("payslips", "What one employee was paid in one payroll run", (
            C("payroll_run_id", "INTEGER", _ref("payroll_runs", "payroll_run_id")),
            C("employee_id", "INTEGER", _ref("employees", "employee_id")),
            C("gross_pay", "DECIMAL(12,2)", NN),
            C("tax_withheld", "DECIMAL(12,2)", NN),
            C("net_pay", "DECIMAL(12,2)", NN, "Amount transferred to the employee"),
        ), ("PRIMARY KEY (payroll_run_id, employee_id)",)),
        _Table("payslip_lines", "Itemised earnings and deductions of a payslip", (
            C("payroll_run_id", "INTEGER", NN),
            C("employee_id", "INTEGER", NN),
            C("line_no", "INTEGER", NN),
            C("kind", "VARCHAR(30)", NN, "base_salary, bonus, overtime, pension or health_insurance"),
            C("amount", "DECIMAL(12,2)", NN, "Positive for earnings, negative for deductions"),
        ), ("PRIMARY KEY (payroll_run_id, employee_id, line_no)",
            "FOREIGN KEY (payroll_run_id, employee_id) REFERENCES payslips(payroll_run_id, employee_id)")),
        _Table("time_off_requests", "Vacation, sick leave and other absences", (
            C("request_id", "INTEGER", PK),
            C("employee_id", "INTEGER", _ref("employees", "employee_id")),
            C("approver_id", "INTEGER", _ref("employees", "employee_id", nullable=True), "Manager who decided"),
            C("leave_type", "VARCHAR(20)", NN, "vacation, sick, parental or unpaid"),
            C("start_date", "DATE", NN),
            C("end_date", "DATE", NN),
            C("days", "DECIMAL(4,1)", NN, "Working days taken"),
            C("status", "VARCHAR(20)", NN, "pending, approved or rejected"),
        )),
        _Table("benefit_plans", "Benefits the company offers", (
            C("benefit_plan_id", "INTEGER", PK),
            C("name", "VARCHAR(80)", NN),
            C("plan_type", "VARCHAR(30)", NN, "health, pension, mobility, wellness or education"),
            C("provider", "VARCHAR(80)", NN),
            C("monthly_cost", "DECIMAL(10,2)", NN, "Employer cost per enrolled employee and month"),
        )),
        _Table("employee_benefits", "Which employee is enrolled in which benefit plan", (
            C("employee_id", "INTEGER", _ref("employees", "employee_id")),
            C("benefit_plan_id", "INTEGER", _ref("benefit_plans", "benefit_plan_id")),
            C("enrolled_on", "DATE", NN),
        ), ("PRIMARY KEY (employee_id, benefit_plan_id)",)),
        _Table("performance_reviews", "Yearly performance reviews", (
            C("review_id", "INTEGER", PK),
            C("employee_id", "INTEGER", _ref("employees", "employee_id"), "Who was reviewed"),
            C("reviewer_id", "INTEGER", _ref("employees", "employee_id"), "Who wrote the review"),
            C("review_year", "INTEGER", NN),
            C("rating", "INTEGER", NN, "1 (below expectations) to 5 (outstanding)"),
            C("summary", "TEXT"),
            C("reviewed_on", "DATE", NN),
        )),
        _Table("projects", "Internal and client projects", (
            C("project_id", "INTEGER", PK),
            C("name", "VARCHAR(120)", NN),
            C("department_id", "INTEGER", _ref("departments", "department_id")),
            C("lead_employee_id", "INTEGER", _ref("employees", "employee_id"), "Project lead"),
            C("start_date", "DATE", NN),
            C("end_date", "DATE"),
            C("budget", "DECIMAL(14,2)", NN),
            C("status", "VARCHAR(20)", NN, "planned, active, completed or cancelled"),
        )),
        _Table("project_assignments", "Who works on which project, and how much", (
            C("project_id", "INTEGER", _ref("projects", "project_id")),
            C("employee_id", "INTEGER", _ref("employees", "employee_id")),
            C("role", "VARCHAR(40)", NN),
            C("allocation_percent", "INTEGER", NN, "Share of working time on the project"),
            C("assigned_on", "DATE", NN),
        ), ("PRIMARY KEY (project_id, employee_id)",)),
        _Table("training_courses", "Training catalogue", (
            C("course_id", "INTEGER", PK),
            C("title", "VARCHAR(120)", NN),
            C("provider", "VARCHAR(80)", NN),
            C("hours", "INTEGER", NN),
            C("is_mandatory", "BOOLEAN", NN, "Compliance training everyone must complete"),
        )),
        _Table("training_enrollments", "Employees enrolled in training courses", (
            C("course_id", "INTEGER", _ref("training_courses", "course_id")),
            C("employee_id", "INTEGER", _ref("employees", "employee_id")),
            C("enrolled_on", "DATE", NN),
            C("completed_on", "DATE", "", "NULL until completed"),
            C("score", "INTEGER", "", "Final assessment score, 0 to 100"),
        ), ("PRIMARY KEY (course_id, employee_id)",)),
    ]


_DEPARTMENTS = (  # name, parent, cost centre
    ("Executive", None, "CC100"), ("Engineering", 1, "CC200"), ("Platform", 2, "CC210"),
    ("Data", 2, "CC220"), ("Sales", 1, "CC300"), ("Marketing", 1, "CC400"),
    ("Finance", 1, "CC500"), ("People", 1, "CC600"), ("Customer Success", 5, "CC310"),
    ("Operations", 1, "CC700"),
)
_POSITIONS = (  # title, family, grade, min, max
    ("Chief Executive Officer", "executive", 7, 220000, 320000),
    ("Head of Department", "management", 6, 130000, 190000),
    ("Engineering Manager", "engineering", 5, 105000, 140000),
    ("Staff Engineer", "engineering", 5, 100000, 135000),
    ("Senior Software Engineer", "engineering", 4, 80000, 110000),
    ("Software Engineer", "engineering", 3, 58000, 82000),
    ("Data Scientist", "engineering", 4, 70000, 100000),
    ("Data Analyst", "engineering", 3, 52000, 72000),
    ("Account Executive", "sales", 3, 50000, 75000),
    ("Sales Development Representative", "sales", 2, 40000, 52000),
    ("Marketing Manager", "marketing", 4, 62000, 85000),
    ("Content Marketer", "marketing", 2, 42000, 56000),
    ("Financial Controller", "finance", 4, 65000, 90000),
    ("Accountant", "finance", 3, 48000, 64000),
    ("HR Business Partner", "people", 4, 60000, 82000),
    ("Recruiter", "people", 3, 46000, 62000),
    ("Customer Success Manager", "customer_success", 3, 48000, 66000),
    ("Support Specialist", "customer_success", 2, 38000, 50000),
    ("Operations Coordinator", "operations", 2, 40000, 54000),
    ("Office Manager", "operations", 2, 38000, 50000),
)
_DEPT_POSITIONS = {2: (3, 4, 5, 6), 3: (4, 5, 6), 4: (7, 8), 5: (9, 10), 6: (11, 12), 7: (13, 14),
                   8: (15, 16), 9: (17, 18), 10: (19, 20), 1: (20,)}


def _hr_rows(rng: random.Random) -> dict[str, list[Row]]:
    rows: dict[str, list[Row]] = {}
    offices = [(1, "Berlin HQ", "Berlin", "DE", "Europe/Berlin"), (2, "Amsterdam", "Amsterdam", "NL", "Europe/Amsterdam"),
               (3, "London", "London", "GB", "Europe/London"), (4, "New York", "New York", "US", "America/New_York"),
               (5, "Lisbon", "Lisbon", "PT", "Europe/Lisbon")]
    rows["offices"] = offices
    rows["departments"] = [(i, name, parent, 1 if i in (1, 7, 8) else rng.randint(1, 5), cc)
                           for i, (name, parent, cc) in enumerate(_DEPARTMENTS, start=1)]
    rows["positions"] = [(i, *p) for i, p in enumerate(_POSITIONS, start=1)]

    employees: list[Row] = []
    heads: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    salary_of: dict[int, float] = {}
    dept_of: dict[int, int] = {}
    status_of: dict[int, str] = {}
    hire_of: dict[int, date] = {}

    def add(dept: int, position: int, manager: int | None) -> int:
        eid = len(employees) + 1
        first, last = _person(rng)
        hired = _day(rng, date(2015, 1, 1), date(2025, 9, 30))
        status = _weighted(rng, (("active", 86), ("on_leave", 4), ("terminated", 10))) if eid > 11 else "active"
        terminated = _day(rng, hired + timedelta(days=90), ANCHOR) if status == "terminated" else None
        office = rows["departments"][dept - 1][3]
        _, lo, hi = _POSITIONS[position - 1][2], _POSITIONS[position - 1][3], _POSITIONS[position - 1][4]
        salary_of[eid] = float(round(rng.uniform(lo, hi), -2))
        employees.append((eid, first, last, _email(first, last, eid, "northwind-people.example"),
                          _email(first, last, rng.randint(1, 99), rng=rng) if rng.random() < 0.7 else None,
                          _phone(rng, rng.choice(_COUNTRIES)[3]), _ssn(rng), _iban_de(rng),
                          _day(rng, date(1962, 1, 1), date(2003, 12, 31)), hired, terminated, dept, position,
                          manager, office, _weighted(rng, (("full_time", 82), ("part_time", 12), ("contractor", 6))),
                          status))
        dept_of[eid], status_of[eid], hire_of[eid] = dept, status, hired
        members.setdefault(dept, []).append(eid)
        return eid

    ceo = add(1, 1, None)
    for dept, (_, parent, _) in enumerate(_DEPARTMENTS, start=1):
        if dept == 1:
            heads[1] = ceo
            continue
        heads[dept] = add(dept, 2, heads.get(parent or 1, ceo))
    while len(employees) < 300:
        dept = rng.choice(range(2, 11))
        candidates = [e for e in members[dept] if e != heads[dept]] if rng.random() < 0.35 else []
        manager = rng.choice(candidates) if candidates else heads[dept]
        add(dept, rng.choice(_DEPT_POSITIONS[dept]), manager)
    rows["employees"] = employees

    salaries: list[Row] = []
    for eid, amount in salary_of.items():
        changes = rng.randint(1, 3)
        since = hire_of[eid]
        for k in range(changes):
            step = amount * (0.92 ** (changes - 1 - k))
            end = None if k == changes - 1 else min(ANCHOR, since + timedelta(days=rng.randint(200, 600)))
            salaries.append((len(salaries) + 1, eid, _money(step), "EUR", since, end))
            if end is None:
                break
            since = end + timedelta(days=1)
    rows["salaries"] = salaries

    runs: list[Row] = []
    payslips: list[Row] = []
    lines: list[Row] = []
    for month in range(7, 13):
        rid = month - 6
        first_day = date(2025, month, 1)
        last_day = (date(2025, month + 1, 1) if month < 12 else date(2026, 1, 1)) - timedelta(days=1)
        runs.append((rid, first_day, last_day, last_day, "paid" if month < 12 else "approved"))
        for eid in salary_of:
            if hire_of[eid] > last_day or status_of[eid] == "terminated":
                continue
            base = _money(salary_of[eid] / 12)
            bonus = _money(base * rng.choice((0, 0, 0, 0.05, 0.1))) if month in (9, 12) else 0.0
            gross = _money(base + bonus)
            pension, health = _money(-gross * 0.093), _money(-gross * 0.073)
            tax = _money(gross * rng.uniform(0.18, 0.32))
            payslips.append((rid, eid, gross, tax, _money(gross + pension + health - tax)))
            items = [("base_salary", base)] + ([("bonus", bonus)] if bonus else []) + \
                [("pension", pension), ("health_insurance", health)]
            lines.extend((rid, eid, n, kind, amt) for n, (kind, amt) in enumerate(items, start=1))
    rows.update(payroll_runs=runs, payslips=payslips, payslip_lines=lines)

    manager_of = {e[0]: e[13] for e in employees}
    time_off: list[Row] = []
    for rid in range(1, 601):
        eid = rng.randint(2, 300)
        start = _day(rng, date(2024, 1, 1), date(2025, 12, 15))
        days = rng.choice((1, 2, 3, 5, 5, 10, 15))
        status = _weighted(rng, (("approved", 80), ("pending", 10), ("rejected", 10)))
        time_off.append((rid, eid, manager_of[eid] if status != "pending" else None,
                         _weighted(rng, (("vacation", 70), ("sick", 22), ("parental", 3), ("unpaid", 5))),
                         start, start + timedelta(days=int(days * 1.4)), float(days), status))
    rows["time_off_requests"] = time_off

    rows["benefit_plans"] = [
        (1, "Company health plan", "health", "Techniker Krankenkasse", 180.0),
        (2, "Dental plus", "health", "Allianz", 24.5),
        (3, "Company pension", "pension", "Deutsche Rentenkasse Direkt", 150.0),
        (4, "Public transport pass", "mobility", "BVG", 49.0),
        (5, "Job bike leasing", "mobility", "JobRad", 65.0),
        (6, "Gym membership", "wellness", "Urban Sports Club", 39.0),
        (7, "Learning budget", "education", "Coursera", 40.0),
        (8, "Mental health support", "wellness", "OpenUp", 15.0),
    ]
    rows["employee_benefits"] = [
        (eid, plan, _day(rng, hire_of[eid], ANCHOR))
        for eid in salary_of for plan in range(1, 9) if rng.random() < 0.25
    ]
    rows["performance_reviews"] = []
    for eid in salary_of:
        for year in (2024, 2025):
            if manager_of[eid] is None or hire_of[eid].year >= year:
                continue
            rating = rng.choices((1, 2, 3, 4, 5), (3, 10, 45, 32, 10))[0]
            rows["performance_reviews"].append((
                len(rows["performance_reviews"]) + 1, eid, manager_of[eid], year, rating,
                rng.choice(("Consistently delivers.", "Strong collaborator.", "Needs to improve planning.",
                            "Exceeded goals this year.", None)), date(year, 12, rng.randint(1, 20))))

    project_names = ("Checkout redesign", "Data warehouse migration", "SOC 2 audit", "Mobile app v3",
                     "Partner portal", "Pricing experiment", "Onboarding revamp", "Cloud cost reduction",
                     "Recruiting pipeline", "ERP rollout", "Customer health score", "Search relevance",
                     "Payroll automation", "Office move Lisbon", "Brand refresh", "Churn prediction",
                     "API rate limiting", "Quarterly close speed-up", "Support chatbot", "Warehouse robotics",
                     "Benefits portal", "Security awareness", "Marketplace launch", "Forecasting model",
                     "Internal wiki")
    projects: list[Row] = []
    assignments: list[Row] = []
    for pid, name in enumerate(project_names, start=1):
        dept = rng.choice(range(2, 11))
        start = _day(rng, date(2023, 1, 1), date(2025, 10, 1))
        status = _weighted(rng, (("active", 45), ("completed", 35), ("planned", 10), ("cancelled", 10)))
        end = start + timedelta(days=rng.randint(60, 400)) if status in ("completed", "cancelled") else None
        projects.append((pid, name, dept, heads[dept], start, end, float(rng.randint(20, 900) * 1000), status))
        for eid in rng.sample(members[dept], min(len(members[dept]), rng.randint(2, 8))):
            assignments.append((pid, eid, "lead" if eid == heads[dept] else rng.choice(("contributor", "reviewer", "sponsor")),
                                rng.choice((10, 20, 25, 50, 80, 100)), start))
    rows.update(projects=projects, project_assignments=assignments)

    courses = (("Information security basics", "KnowBe4", 2, True), ("Data protection (GDPR)", "TÜV", 3, True),
               ("Leading teams", "Harvard ManageMentor", 16, False), ("SQL for analysts", "DataCamp", 12, False),
               ("Negotiation skills", "Coursera", 8, False), ("Anti-harassment", "internal", 2, True),
               ("Public speaking", "Toastmasters", 10, False), ("Python fundamentals", "DataCamp", 20, False),
               ("Financial literacy", "internal", 4, False), ("First aid", "Red Cross", 8, False),
               ("Kubernetes in practice", "Linux Foundation", 24, False), ("Giving feedback", "internal", 3, False),
               ("Agile project management", "Scrum.org", 14, False), ("Customer empathy", "internal", 2, False),
               ("Excel modelling", "CFI", 10, False))
    rows["training_courses"] = [(i, *c) for i, c in enumerate(courses, start=1)]
    enrollments: list[Row] = []
    for eid in salary_of:
        for cid in rng.sample(range(1, 16), rng.randint(1, 4)):
            enrolled = _day(rng, max(hire_of[eid], date(2023, 1, 1)), ANCHOR)
            done = enrolled + timedelta(days=rng.randint(3, 60)) if rng.random() < 0.75 else None
            enrollments.append((cid, eid, enrolled, done if done and done <= ANCHOR else None,
                                rng.randint(55, 100) if done and done <= ANCHOR else None))
    rows["training_enrollments"] = enrollments
    return rows


_HR_VIEWS = [
    _View("active_employees", "Employees currently employed (status active or on_leave)",
          "CREATE VIEW active_employees AS SELECT employee_id, first_name, last_name, department_id, "
          "position_id, manager_id, office_id, hire_date FROM employees WHERE status <> 'terminated'"),
]

_HR_SYNONYMS = {
    "employees.last_name": ["surname", "family name"],
    "employees.manager_id": ["boss", "supervisor", "reports to"],
    "employees.hire_date": ["start date", "joined"],
    "salaries.annual_amount": ["pay", "compensation", "wage"],
    "payslips.net_pay": ["take-home pay"],
    "time_off_requests.leave_type": ["absence type", "holiday", "PTO"],
    "departments.name": ["team", "unit"],
}


# --------------------------------------------------------------------------------------------
# support (SQLite, another tenant)


def _support_tables() -> list[_Table]:
    return [
        _Table("accounts", "Customer companies that buy support plans", (
            C("account_id", "INTEGER", PK),
            C("company_name", "VARCHAR(120)", NN),
            C("plan", "VARCHAR(20)", NN, "basic, business or enterprise"),
            C("country", "VARCHAR(2)", NN),
            C("created_at", "TIMESTAMP", NN),
        )),
        _Table("contacts", "People at customer accounts who open tickets", (
            C("contact_id", "INTEGER", PK),
            C("account_id", "INTEGER", _ref("accounts", "account_id")),
            C("full_name", "VARCHAR(120)", NN),
            C("email", "VARCHAR(120)", NN),
            C("phone", "VARCHAR(30)"),
        )),
        _Table("agents", "Support agents answering tickets", (
            C("agent_id", "INTEGER", PK),
            C("full_name", "VARCHAR(120)", NN),
            C("email", "VARCHAR(120)", f"{NN} UNIQUE"),
            C("team", "VARCHAR(40)", NN, "tier1, tier2 or billing"),
            C("hired_on", "DATE", NN),
        )),
        _Table("sla_policies", "Service level targets per ticket priority", (
            C("policy_id", "INTEGER", PK),
            C("priority", "VARCHAR(10)", f"{NN} UNIQUE", "low, normal, high or urgent"),
            C("first_response_minutes", "INTEGER", NN, "Target time to the first agent reply"),
            C("resolution_hours", "INTEGER", NN, "Target time to resolution"),
        )),
        _Table("tickets", "Support requests", (
            C("ticket_id", "INTEGER", PK),
            C("account_id", "INTEGER", _ref("accounts", "account_id")),
            C("contact_id", "INTEGER", _ref("contacts", "contact_id"), "Who opened the ticket"),
            C("assigned_agent_id", "INTEGER", _ref("agents", "agent_id", nullable=True)),
            C("policy_id", "INTEGER", _ref("sla_policies", "policy_id")),
            C("subject", "VARCHAR(200)", NN),
            C("channel", "VARCHAR(10)", NN, "email, chat, phone or web"),
            C("status", "VARCHAR(20)", NN, "open, pending, solved or closed"),
            C("opened_at", "TIMESTAMP", NN),
            C("first_response_at", "TIMESTAMP"),
            C("resolved_at", "TIMESTAMP"),
            C("requester_ip", "VARCHAR(45)", "", "IP address the web form was sent from"),
        )),
        _Table("ticket_messages", "The conversation of a ticket", (
            C("message_id", "INTEGER", PK),
            C("ticket_id", "INTEGER", _ref("tickets", "ticket_id")),
            C("author_type", "VARCHAR(10)", NN, "customer or agent"),
            C("agent_id", "INTEGER", _ref("agents", "agent_id", nullable=True), "Set when an agent wrote it"),
            C("body", "TEXT", NN),
            C("sent_at", "TIMESTAMP", NN),
        )),
        _Table("satisfaction_surveys", "Customer satisfaction (CSAT) answers after a ticket is solved", (
            C("ticket_id", "INTEGER", f"{PK} REFERENCES tickets(ticket_id)"),
            C("score", "INTEGER", NN, "1 (very unhappy) to 5 (very happy)"),
            C("comment", "TEXT"),
            C("submitted_at", "TIMESTAMP", NN),
        )),
    ]


def _support_rows(rng: random.Random) -> dict[str, list[Row]]:
    rows: dict[str, list[Row]] = {}
    accounts: list[Row] = []
    for aid in range(1, 61):
        accounts.append((aid, f"{rng.choice(_BRANDS)} {rng.choice(('Labs', 'Logistics', 'Health', 'Media', 'Energy'))}",
                         _weighted(rng, (("basic", 50), ("business", 35), ("enterprise", 15))),
                         rng.choice(_COUNTRIES)[0], _moment(rng, date(2020, 1, 1), date(2024, 12, 31))))
    rows["accounts"] = accounts
    contacts: list[Row] = []
    for cid in range(1, 151):
        first, last = _person(rng)
        aid = rng.randint(1, 60)
        contacts.append((cid, aid, f"{first} {last}", _email(first, last, cid, f"account{aid}.example.com"),
                         _phone(rng, rng.choice(_COUNTRIES)[3]) if rng.random() < 0.6 else None))
    rows["contacts"] = contacts
    contact_account = {c[0]: c[1] for c in contacts}
    agents: list[Row] = []
    for gid in range(1, 13):
        first, last = _person(rng)
        agents.append((gid, f"{first} {last}", _email(first, last, gid, "help.globex.example"),
                       _weighted(rng, (("tier1", 6), ("tier2", 4), ("billing", 2))),
                       _day(rng, date(2019, 1, 1), date(2025, 3, 1))))
    rows["agents"] = agents
    policies = [(1, "low", 1440, 120), (2, "normal", 480, 48), (3, "high", 120, 24), (4, "urgent", 30, 8)]
    rows["sla_policies"] = policies
    subjects = ("Cannot log in", "Invoice shows wrong amount", "Export to CSV fails", "API returns 500",
                "How do I add a user?", "Request for refund", "Slow dashboard", "SSO configuration",
                "Data missing after import", "Change billing address", "Feature request: dark mode",
                "Password reset e-mail not received")
    tickets: list[Row] = []
    messages: list[Row] = []
    surveys: list[Row] = []
    for tid in range(1, 801):
        contact = rng.randint(1, 150)
        policy = rng.choices((1, 2, 3, 4), (25, 50, 18, 7))[0]
        opened = _moment(rng, date(2025, 1, 1), ANCHOR - timedelta(days=1))
        status = _weighted(rng, (("closed", 55), ("solved", 20), ("pending", 10), ("open", 15)))
        agent = rng.randint(1, 12) if status != "open" or rng.random() < 0.5 else None
        first_reply = opened + timedelta(minutes=int(rng.expovariate(1 / (policies[policy - 1][2] * 0.7))) + 1) \
            if agent else None
        resolved = opened + timedelta(hours=rng.uniform(0.5, policies[policy - 1][3] * 1.6)) \
            if status in ("solved", "closed") else None
        channel = _weighted(rng, (("email", 45), ("web", 30), ("chat", 18), ("phone", 7)))
        tickets.append((tid, contact_account[contact], contact, agent, policy, rng.choice(subjects), channel,
                        status, opened, first_reply, resolved, _ip(rng) if channel == "web" else None))
        messages.append((len(messages) + 1, tid, "customer", None, "Hello, " + rng.choice(subjects).lower() + ".", opened))
        if first_reply:
            messages.append((len(messages) + 1, tid, "agent", agent,
                             rng.choice(("Thanks for reaching out, looking into it.", "Could you send a screenshot?",
                                         "This is fixed now.")), first_reply))
            for k in range(rng.randint(0, 3)):
                who = rng.choice(("customer", "agent"))
                messages.append((len(messages) + 1, tid, who, agent if who == "agent" else None,
                                 rng.choice(("Any update?", "Still happening.", "Deployed a fix.", "Thank you!")),
                                 first_reply + timedelta(hours=k + rng.uniform(0.1, 5))))
        if resolved and rng.random() < 0.5:
            surveys.append((tid, rng.choices((1, 2, 3, 4, 5), (6, 6, 12, 36, 40))[0],
                            rng.choice(("Quick and friendly", "Took too long", "Problem solved", None)),
                            resolved + timedelta(hours=rng.randint(1, 72))))
    rows.update(tickets=tickets, ticket_messages=messages, satisfaction_surveys=surveys)
    return rows


# --------------------------------------------------------------------------------------------
# Writers


def _sqlite_value(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    return value


def _write_sqlite(path: Path, data: _Dataset) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA foreign_keys = ON")  # the generators must produce consistent keys
        with conn:
            for table in data.tables:
                conn.execute(table.ddl())
            for view in data.views:
                conn.execute(view.sql)
            for table in data.tables:
                conn.executemany(table.insert_sql(), [tuple(_sqlite_value(v) for v in row)
                                                      for row in data.rows.get(table.name, [])])
        bad = conn.execute("PRAGMA foreign_key_check").fetchall()
        if bad:  # pragma: no cover - a bug in a generator
            raise RuntimeError(f"demo data violates foreign keys: {bad[:3]}")
    finally:
        conn.close()


def _sql_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _csv_cell(value: object) -> object:
    if value is None:
        return r"\N"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    return value


def _write_duckdb(path: Path, data: _Dataset) -> None:
    """Load through CSV files: DuckDB binds parameters slowly (~100 µs a row), read_csv is 5x faster."""
    import duckdb

    conn = duckdb.connect(str(path))
    try:
        with tempfile.TemporaryDirectory(prefix="nl2sql-demo-") as scratch:
            for table in data.tables:
                conn.execute(table.ddl())
                conn.execute(f"COMMENT ON TABLE {table.name} IS {_sql_literal(table.doc)}")
                for col in table.columns:
                    if col.doc:
                        conn.execute(f"COMMENT ON COLUMN {table.name}.{col.name} IS {_sql_literal(col.doc)}")
            for table in data.tables:
                rows = data.rows.get(table.name, [])
                self_ref = next((c for c in table.columns if f"REFERENCES {table.name}(" in c.extra), None)
                batches: list[list[Row]]
                if self_ref is not None:  # parents before children: DuckDB checks keys per statement
                    index = [c.name for c in table.columns].index(self_ref.name)
                    batches = [[r for r in rows if r[index] is None], [r for r in rows if r[index] is not None]]
                else:
                    batches = [rows]
                types = ", ".join(f"{_sql_literal(c.name)}: {_sql_literal(c.type)}" for c in table.columns)
                for number, batch in enumerate(batches):
                    csv_path = Path(scratch) / f"{table.name}.{number}.csv"
                    with csv_path.open("w", newline="", encoding="utf-8") as handle:
                        csv.writer(handle).writerows([_csv_cell(v) for v in row] for row in batch)
                    conn.execute(
                        f"INSERT INTO {table.name} SELECT * FROM read_csv({_sql_literal(str(csv_path))}, "
                        f"header = false, auto_detect = false, nullstr = '\\N', quote = '\"', escape = '\"', "
                        f"columns = {{{types}}})"
                    )
        for view in data.views:
            conn.execute(view.sql)
            conn.execute(f"COMMENT ON VIEW {view.name} IS {_sql_literal(view.doc)}")
        conn.execute("CHECKPOINT")
    finally:
        conn.close()


def _annotations(data: _Dataset, synonyms: dict[str, list[str]]) -> dict[str, object]:
    tables = {t.name: t.doc for t in data.tables}
    tables.update({v.name: v.doc for v in data.views})
    columns = {f"{t.name}.{c.name}": c.doc for t in data.tables for c in t.columns if c.doc}
    return {"tables": tables, "columns": columns, "synonyms": synonyms}


@dataclass(frozen=True)
class _DemoSource:
    id: str
    filename: str
    engine: str  # "duckdb" or "sqlite"
    tables: Callable[[], list[_Table]]
    views: list[_View]
    rows: Callable[[random.Random], dict[str, list[Row]]]
    entry: dict[str, object]
    synonyms: dict[str, list[str]] = field(default_factory=dict)

    def dataset(self) -> _Dataset:
        return _Dataset(self.tables(), self.views, self.rows(random.Random(f"{DEMO_SEED}:{self.id}")))

    def docs(self) -> _Dataset:
        """The schema without rows: enough for the data dictionary."""
        return _Dataset(self.tables(), self.views)


_SOURCES = (
    _DemoSource(
        "commerce", "commerce.duckdb", "duckdb", _commerce_tables, _COMMERCE_VIEWS, _commerce_rows,
        {
            "description": "Acme's web shop: customers, orders, order lines, payments, shipments, returns, "
                           "product catalogue, inventory per warehouse, reviews and shopping carts",
            "domains": ["commerce", "sales", "logistics"],
            "example_questions": ["Revenue by month in 2025?", "Top 10 products by units sold",
                                  "Return rate per product category", "Which customers have abandoned carts?"],
            "tenant": "acme",
            "metrics": [
                {"name": "revenue", "definition": "sum(orders.total) where orders.status in ('paid', 'shipped', "
                                                  "'delivered')",
                 "grain": "order", "description": "Money taken from customers, including shipping, after discounts"},
                {"name": "average_order_value",
                 "definition": "avg(orders.total) where orders.status in ('paid', 'shipped', 'delivered')",
                 "grain": "order"},
                {"name": "gross_margin", "definition": "sum(order_items.line_total - order_items.quantity * "
                                                       "products.cost_price)",
                 "grain": "order line", "description": "Revenue from products minus what they cost us"},
                {"name": "return_rate", "definition": "count(returns.return_id) / count(order_items.*)",
                 "grain": "order line"},
            ],
        },
        {"customers.email": ["e-mail address", "login"], "orders.total": ["order value", "amount paid"],
         "inventory.quantity_on_hand": ["stock", "stock level"]},
    ),
    _DemoSource(
        "hr", "hr.sqlite", "sqlite", _hr_tables, _HR_VIEWS, _hr_rows,
        {
            "description": "Acme's people operations: employees and their managers, departments, offices, "
                           "positions and salary bands, salary history, monthly payroll, time off, benefits, "
                           "performance reviews, projects and training",
            "domains": ["hr", "payroll", "people"],
            "example_questions": ["Headcount per department", "Average salary by position",
                                  "Who reports to the head of engineering?", "Sick days per month in 2025"],
            "tenant": "acme",
            "metrics": [
                {"name": "headcount", "definition": "count(employees.employee_id) where employees.status <> "
                                                    "'terminated'",
                 "grain": "employee"},
                {"name": "average_salary", "definition": "avg(salaries.annual_amount) where "
                                                         "salaries.effective_to is null",
                 "grain": "employee"},
                {"name": "payroll_cost", "definition": "sum(payslips.gross_pay)", "grain": "payroll run",
                 "description": "Gross pay of all employees in the period"},
                {"name": "attrition_rate", "definition": "count(employees where termination_date in period) / "
                                                         "average headcount in period",
                 "grain": "month"},
            ],
        },
        _HR_SYNONYMS,
    ),
    _DemoSource(
        "support", "support.sqlite", "sqlite", _support_tables, [], _support_rows,
        {
            "description": "Globex's customer support desk: accounts, contacts, agents, tickets and their "
                           "messages, SLA policies and satisfaction surveys",
            "domains": ["support", "customer service"],
            "example_questions": ["Tickets opened per week by channel", "Which tickets breached the SLA?",
                                  "CSAT per agent"],
            "tenant": "globex",
            "metrics": [
                {"name": "first_response_time",
                 "definition": "avg(tickets.first_response_at - tickets.opened_at)", "grain": "ticket"},
                {"name": "sla_breach_rate",
                 "definition": "share of tickets where first_response_at - opened_at > "
                               "sla_policies.first_response_minutes",
                 "grain": "ticket"},
                {"name": "csat", "definition": "avg(satisfaction_surveys.score)", "grain": "survey"},
            ],
        },
        {"tickets.subject": ["title", "issue"], "agents.full_name": ["agent name", "support rep"]},
    ),
)


def _build(source: _DemoSource, target: Path) -> None:
    """Write one demo database to a temporary file, then move it into place atomically."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
        leftover.unlink(missing_ok=True)
    data = source.dataset()
    try:
        if source.engine == "duckdb":
            _write_duckdb(tmp, data)
        else:
            _write_sqlite(tmp, data)
        os.replace(tmp, target)
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
            leftover.unlink(missing_ok=True)
    logger.info("demo datasource %s: %d tables, %d rows", source.id, len(data.tables),
                sum(len(r) for r in data.rows.values()))


def demo_datasources_document(demo_dir: Path) -> dict[str, object]:
    """The datasources-file document naming the demo databases in ``demo_dir``."""
    entries = []
    for source in _SOURCES:
        path = (demo_dir / source.filename).absolute()
        entry: dict[str, object] = {"id": source.id, "url": f"{source.engine}:///{path.as_posix()}"}
        entry.update(source.entry)
        if source.engine == "sqlite":  # no COMMENT in SQLite: the data dictionary lives here
            entry["annotations"] = _annotations(source.docs(), source.synonyms)
        elif source.synonyms:
            entry["annotations"] = {"synonyms": source.synonyms}
        entries.append(entry)
    return {"datasources": entries}

_HEADER = """\
# Demo datasources written by `nl2sql-assets demo` (nl2sql_assets/demo.py).
# Format: see README.md, "The datasources file". Edit freely; `demo` keeps an existing file.
"""


def create_demo(home: Path, *, overwrite: bool = False, datasources_path: Path | None = None) -> Path:
    """Create the demo databases under ``home/demo/`` and a datasources file naming them.

    Idempotent: existing databases and an existing datasources file are kept as they are,
    unless ``overwrite`` is set, in which case everything is rebuilt. Each file appears
    atomically, so an interrupted run never leaves a half-written database behind.

    Args:
        home: the NL2SQL_HOME folder (created when missing).
        overwrite: rebuild the databases and rewrite the datasources file.
        datasources_path: where to write the datasources file; ``home/datasources.yaml`` by default.

    Returns:
        The path of the datasources file.
    """
    home = Path(home).absolute()
    demo_dir = home / "demo"
    demo_dir.mkdir(parents=True, exist_ok=True)
    for source in _SOURCES:
        target = demo_dir / source.filename
        if overwrite or not target.exists():
            _build(source, target)
        else:
            logger.info("demo datasource %s exists, kept", source.id)
    path = Path(datasources_path).absolute() if datasources_path else home / "datasources.yaml"
    if overwrite or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        text = _HEADER + yaml.safe_dump(demo_datasources_document(demo_dir), sort_keys=False,
                                        allow_unicode=True, width=100)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    else:
        logger.info("datasources file %s exists, kept", path)
    return path
