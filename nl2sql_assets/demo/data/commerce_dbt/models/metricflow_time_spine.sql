{{ config(materialized='view') }}
-- MetricFlow's daily time spine. The demo database does not have it, so indexing lists it as a
-- dbt model that matches no table: how a relation missing from the database is reported.
select cast(range as date) as date_day from range(date '2024-01-01', date '2026-01-01', interval 1 day)
