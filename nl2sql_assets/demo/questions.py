"""Sample questions over the demo datasources, with the tables a good retriever should find."""

from __future__ import annotations

from dataclasses import dataclass


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
