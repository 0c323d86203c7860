{{ config(materialized='view') }}
select date_trunc('month', ordered_at) as month, count(*) as order_count, sum(total) as revenue
from {{ source('shop', 'orders') }}
where status in ('paid', 'shipped', 'delivered')
group by 1
