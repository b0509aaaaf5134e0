"""TPC-H: schema (Arrow), primary keys, the 22 queries (Spark SQL, the spec's validation
parameters) and a parameter generator following the spec's substitution rules (§2.4).

Dates are date32, money decimal(15,2), keys int64, like the TPC-H spec's types.
"""

from __future__ import annotations

import datetime as dt
import random

import pyarrow as pa

_MONEY = pa.decimal128(15, 2)

TPCH_SCHEMAS: dict[str, pa.Schema] = {
    "region": pa.schema([("r_regionkey", pa.int64()), ("r_name", pa.string()), ("r_comment", pa.string())]),
    "nation": pa.schema([("n_nationkey", pa.int64()), ("n_name", pa.string()), ("n_regionkey", pa.int64()),
                         ("n_comment", pa.string())]),
    "supplier": pa.schema([("s_suppkey", pa.int64()), ("s_name", pa.string()), ("s_address", pa.string()),
                           ("s_nationkey", pa.int64()), ("s_phone", pa.string()), ("s_acctbal", _MONEY),
                           ("s_comment", pa.string())]),
    "customer": pa.schema([("c_custkey", pa.int64()), ("c_name", pa.string()), ("c_address", pa.string()),
                           ("c_nationkey", pa.int64()), ("c_phone", pa.string()), ("c_acctbal", _MONEY),
                           ("c_mktsegment", pa.string()), ("c_comment", pa.string())]),
    "part": pa.schema([("p_partkey", pa.int64()), ("p_name", pa.string()), ("p_mfgr", pa.string()),
                       ("p_brand", pa.string()), ("p_type", pa.string()), ("p_size", pa.int32()),
                       ("p_container", pa.string()), ("p_retailprice", _MONEY), ("p_comment", pa.string())]),
    "partsupp": pa.schema([("ps_partkey", pa.int64()), ("ps_suppkey", pa.int64()), ("ps_availqty", pa.int32()),
                           ("ps_supplycost", _MONEY), ("ps_comment", pa.string())]),
    "orders": pa.schema([("o_orderkey", pa.int64()), ("o_custkey", pa.int64()), ("o_orderstatus", pa.string()),
                         ("o_totalprice", _MONEY), ("o_orderdate", pa.date32()), ("o_orderpriority", pa.string()),
                         ("o_clerk", pa.string()), ("o_shippriority", pa.int32()), ("o_comment", pa.string())]),
    "lineitem": pa.schema([("l_orderkey", pa.int64()), ("l_partkey", pa.int64()), ("l_suppkey", pa.int64()),
                           ("l_linenumber", pa.int32()), ("l_quantity", _MONEY), ("l_extendedprice", _MONEY),
                           ("l_discount", _MONEY), ("l_tax", _MONEY), ("l_returnflag", pa.string()),
                           ("l_linestatus", pa.string()), ("l_shipdate", pa.date32()), ("l_commitdate", pa.date32()),
                           ("l_receiptdate", pa.date32()), ("l_shipinstruct", pa.string()),
                           ("l_shipmode", pa.string()), ("l_comment", pa.string())]),
}

# partsupp and lineitem have composite keys; only single-column keys induce literal cuts.
TPCH_PRIMARY_KEYS: dict[str, list[str]] = {
    "region": ["r_regionkey"], "nation": ["n_nationkey"], "supplier": ["s_suppkey"], "customer": ["c_custkey"],
    "part": ["p_partkey"], "partsupp": ["ps_partkey", "ps_suppkey"], "orders": ["o_orderkey"],
    "lineitem": ["l_orderkey", "l_linenumber"],
}

# Templates: {name} placeholders are substituted by tpch_workload(); TPCH_QUERIES uses the
# spec's validation parameters.
_TEMPLATES: dict[int, str] = {
    1: """select l_returnflag, l_linestatus, sum(l_quantity) as sum_qty, sum(l_extendedprice) as sum_base_price,
  sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,
  sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge, avg(l_quantity) as avg_qty,
  avg(l_extendedprice) as avg_price, avg(l_discount) as avg_disc, count(*) as count_order
from lineitem
where l_shipdate <= date '1998-12-01' - interval '{delta}' day
group by l_returnflag, l_linestatus order by l_returnflag, l_linestatus""",
    2: """select s_acctbal, s_name, n_name, p_partkey, p_mfgr, s_address, s_phone, s_comment
from part, supplier, partsupp, nation, region
where p_partkey = ps_partkey and s_suppkey = ps_suppkey and p_size = {size} and p_type like '%{type}'
  and s_nationkey = n_nationkey and n_regionkey = r_regionkey and r_name = '{region}'
  and ps_supplycost = (select min(ps_supplycost) from partsupp, supplier, nation, region
    where p_partkey = ps_partkey and s_suppkey = ps_suppkey and s_nationkey = n_nationkey
      and n_regionkey = r_regionkey and r_name = '{region}')
order by s_acctbal desc, n_name, s_name, p_partkey limit 100""",
    3: """select l_orderkey, sum(l_extendedprice * (1 - l_discount)) as revenue, o_orderdate, o_shippriority
from customer, orders, lineitem
where c_mktsegment = '{segment}' and c_custkey = o_custkey and l_orderkey = o_orderkey
  and o_orderdate < date '{date}' and l_shipdate > date '{date}'
group by l_orderkey, o_orderdate, o_shippriority order by revenue desc, o_orderdate limit 10""",
    4: """select o_orderpriority, count(*) as order_count from orders
where o_orderdate >= date '{date}' and o_orderdate < date '{date}' + interval '3' month
  and exists (select * from lineitem where l_orderkey = o_orderkey and l_commitdate < l_receiptdate)
group by o_orderpriority order by o_orderpriority""",
    5: """select n_name, sum(l_extendedprice * (1 - l_discount)) as revenue
from customer, orders, lineitem, supplier, nation, region
where c_custkey = o_custkey and l_orderkey = o_orderkey and l_suppkey = s_suppkey
  and c_nationkey = s_nationkey and s_nationkey = n_nationkey and n_regionkey = r_regionkey
  and r_name = '{region}' and o_orderdate >= date '{date}' and o_orderdate < date '{date}' + interval '1' year
group by n_name order by revenue desc""",
    6: """select sum(l_extendedprice * l_discount) as revenue from lineitem
where l_shipdate >= date '{date}' and l_shipdate < date '{date}' + interval '1' year
  and l_discount between {discount} - 0.01 and {discount} + 0.01 and l_quantity < {quantity}""",
    7: """select supp_nation, cust_nation, l_year, sum(volume) as revenue from (
  select n1.n_name as supp_nation, n2.n_name as cust_nation, extract(year from l_shipdate) as l_year,
    l_extendedprice * (1 - l_discount) as volume
  from supplier, lineitem, orders, customer, nation n1, nation n2
  where s_suppkey = l_suppkey and o_orderkey = l_orderkey and c_custkey = o_custkey
    and s_nationkey = n1.n_nationkey and c_nationkey = n2.n_nationkey
    and ((n1.n_name = '{nation1}' and n2.n_name = '{nation2}') or (n1.n_name = '{nation2}' and n2.n_name = '{nation1}'))
    and l_shipdate between date '1995-01-01' and date '1996-12-31') as shipping
group by supp_nation, cust_nation, l_year order by supp_nation, cust_nation, l_year""",
    8: """select o_year, sum(case when nation = '{nation}' then volume else 0 end) / sum(volume) as mkt_share from (
  select extract(year from o_orderdate) as o_year, l_extendedprice * (1 - l_discount) as volume, n2.n_name as nation
  from part, supplier, lineitem, orders, customer, nation n1, nation n2, region
  where p_partkey = l_partkey and s_suppkey = l_suppkey and l_orderkey = o_orderkey and o_custkey = c_custkey
    and c_nationkey = n1.n_nationkey and n1.n_regionkey = r_regionkey and r_name = '{region}'
    and s_nationkey = n2.n_nationkey and o_orderdate between date '1995-01-01' and date '1996-12-31'
    and p_type = '{type}') as all_nations
group by o_year order by o_year""",
    9: """select nation, o_year, sum(amount) as sum_profit from (
  select n_name as nation, extract(year from o_orderdate) as o_year,
    l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity as amount
  from part, supplier, lineitem, partsupp, orders, nation
  where s_suppkey = l_suppkey and ps_suppkey = l_suppkey and ps_partkey = l_partkey and p_partkey = l_partkey
    and o_orderkey = l_orderkey and s_nationkey = n_nationkey and p_name like '%{color}%') as profit
group by nation, o_year order by nation, o_year desc""",
    10: """select c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) as revenue, c_acctbal, n_name, c_address,
  c_phone, c_comment
from customer, orders, lineitem, nation
where c_custkey = o_custkey and l_orderkey = o_orderkey and o_orderdate >= date '{date}'
  and o_orderdate < date '{date}' + interval '3' month and l_returnflag = 'R' and c_nationkey = n_nationkey
group by c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment order by revenue desc limit 20""",
    11: """select ps_partkey, sum(ps_supplycost * ps_availqty) as value from partsupp, supplier, nation
where ps_suppkey = s_suppkey and s_nationkey = n_nationkey and n_name = '{nation}'
group by ps_partkey having sum(ps_supplycost * ps_availqty) > (
  select sum(ps_supplycost * ps_availqty) * {fraction} from partsupp, supplier, nation
  where ps_suppkey = s_suppkey and s_nationkey = n_nationkey and n_name = '{nation}')
order by value desc""",
    12: """select l_shipmode,
  sum(case when o_orderpriority = '1-URGENT' or o_orderpriority = '2-HIGH' then 1 else 0 end) as high_line_count,
  sum(case when o_orderpriority <> '1-URGENT' and o_orderpriority <> '2-HIGH' then 1 else 0 end) as low_line_count
from orders, lineitem
where o_orderkey = l_orderkey and l_shipmode in ('{shipmode1}', '{shipmode2}') and l_commitdate < l_receiptdate
  and l_shipdate < l_commitdate and l_receiptdate >= date '{date}' and l_receiptdate < date '{date}' + interval '1' year
group by l_shipmode order by l_shipmode""",
    13: """select c_count, count(*) as custdist from (
  select c_custkey, count(o_orderkey) as c_count
  from customer left outer join orders on c_custkey = o_custkey and o_comment not like '%{word1}%{word2}%'
  group by c_custkey) as c_orders
group by c_count order by custdist desc, c_count desc""",
    14: """select 100.00 * sum(case when p_type like 'PROMO%' then l_extendedprice * (1 - l_discount) else 0 end)
  / sum(l_extendedprice * (1 - l_discount)) as promo_revenue
from lineitem, part
where l_partkey = p_partkey and l_shipdate >= date '{date}' and l_shipdate < date '{date}' + interval '1' month""",
    15: """with revenue0 as (select l_suppkey as supplier_no, sum(l_extendedprice * (1 - l_discount)) as total_revenue
  from lineitem where l_shipdate >= date '{date}' and l_shipdate < date '{date}' + interval '3' month
  group by l_suppkey)
select s_suppkey, s_name, s_address, s_phone, total_revenue from supplier, revenue0
where s_suppkey = supplier_no and total_revenue = (select max(total_revenue) from revenue0)
order by s_suppkey""",
    16: """select p_brand, p_type, p_size, count(distinct ps_suppkey) as supplier_cnt from partsupp, part
where p_partkey = ps_partkey and p_brand <> '{brand}' and p_type not like '{type}%'
  and p_size in ({sizes})
  and ps_suppkey not in (select s_suppkey from supplier where s_comment like '%Customer%Complaints%')
group by p_brand, p_type, p_size order by supplier_cnt desc, p_brand, p_type, p_size""",
    17: """select sum(l_extendedprice) / 7.0 as avg_yearly from lineitem, part
where p_partkey = l_partkey and p_brand = '{brand}' and p_container = '{container}'
  and l_quantity < (select 0.2 * avg(l_quantity) from lineitem where l_partkey = p_partkey)""",
    18: """select c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, sum(l_quantity)
from customer, orders, lineitem
where o_orderkey in (select l_orderkey from lineitem group by l_orderkey having sum(l_quantity) > {quantity})
  and c_custkey = o_custkey and o_orderkey = l_orderkey
group by c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice order by o_totalprice desc, o_orderdate limit 100""",
    19: """select sum(l_extendedprice * (1 - l_discount)) as revenue from lineitem, part
where (p_partkey = l_partkey and p_brand = '{brand1}' and p_container in ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG')
    and l_quantity >= {quantity1} and l_quantity <= {quantity1} + 10 and p_size between 1 and 5
    and l_shipmode in ('AIR', 'AIR REG') and l_shipinstruct = 'DELIVER IN PERSON')
  or (p_partkey = l_partkey and p_brand = '{brand2}' and p_container in ('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK')
    and l_quantity >= {quantity2} and l_quantity <= {quantity2} + 10 and p_size between 1 and 10
    and l_shipmode in ('AIR', 'AIR REG') and l_shipinstruct = 'DELIVER IN PERSON')
  or (p_partkey = l_partkey and p_brand = '{brand3}' and p_container in ('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG')
    and l_quantity >= {quantity3} and l_quantity <= {quantity3} + 10 and p_size between 1 and 15
    and l_shipmode in ('AIR', 'AIR REG') and l_shipinstruct = 'DELIVER IN PERSON')""",
    20: """select s_name, s_address from supplier, nation
where s_suppkey in (select ps_suppkey from partsupp
    where ps_partkey in (select p_partkey from part where p_name like '{color}%')
      and ps_availqty > (select 0.5 * sum(l_quantity) from lineitem
        where l_partkey = ps_partkey and l_suppkey = ps_suppkey and l_shipdate >= date '{date}'
          and l_shipdate < date '{date}' + interval '1' year))
  and s_nationkey = n_nationkey and n_name = '{nation}'
order by s_name""",
    21: """select s_name, count(*) as numwait from supplier, lineitem l1, orders, nation
where s_suppkey = l1.l_suppkey and o_orderkey = l1.l_orderkey and o_orderstatus = 'F'
  and l1.l_receiptdate > l1.l_commitdate
  and exists (select * from lineitem l2 where l2.l_orderkey = l1.l_orderkey and l2.l_suppkey <> l1.l_suppkey)
  and not exists (select * from lineitem l3 where l3.l_orderkey = l1.l_orderkey and l3.l_suppkey <> l1.l_suppkey
    and l3.l_receiptdate > l3.l_commitdate)
  and s_nationkey = n_nationkey and n_name = '{nation}'
group by s_name order by numwait desc, s_name limit 100""",
    22: """select cntrycode, count(*) as numcust, sum(c_acctbal) as totacctbal from (
  select substring(c_phone, 1, 2) as cntrycode, c_acctbal from customer
  where substring(c_phone, 1, 2) in ({codes})
    and c_acctbal > (select avg(c_acctbal) from customer where c_acctbal > 0.00
      and substring(c_phone, 1, 2) in ({codes}))
    and not exists (select * from orders where o_custkey = c_custkey)) as custsale
group by cntrycode order by cntrycode""",
}

# The spec's validation parameters (TPC-H 3.0.1, §2.4.x.3 / Appendix).
_VALIDATION: dict[int, dict[str, object]] = {
    1: {"delta": 90},
    2: {"size": 15, "type": "BRASS", "region": "EUROPE"},
    3: {"segment": "BUILDING", "date": "1995-03-15"},
    4: {"date": "1993-07-01"},
    5: {"region": "ASIA", "date": "1994-01-01"},
    6: {"date": "1994-01-01", "discount": "0.06", "quantity": 24},
    7: {"nation1": "FRANCE", "nation2": "GERMANY"},
    8: {"nation": "BRAZIL", "region": "AMERICA", "type": "ECONOMY ANODIZED STEEL"},
    9: {"color": "green"},
    10: {"date": "1993-10-01"},
    11: {"nation": "GERMANY", "fraction": "0.0001"},
    12: {"shipmode1": "MAIL", "shipmode2": "SHIP", "date": "1994-01-01"},
    13: {"word1": "special", "word2": "requests"},
    14: {"date": "1995-09-01"},
    15: {"date": "1996-01-01"},
    16: {"brand": "Brand#45", "type": "MEDIUM POLISHED", "sizes": "49, 14, 23, 45, 19, 3, 36, 9"},
    17: {"brand": "Brand#23", "container": "MED BOX"},
    18: {"quantity": 300},
    19: {"brand1": "Brand#12", "brand2": "Brand#23", "brand3": "Brand#34", "quantity1": 1, "quantity2": 10,
         "quantity3": 20},
    20: {"color": "forest", "date": "1994-01-01", "nation": "CANADA"},
    21: {"nation": "SAUDI ARABIA"},
    22: {"codes": "'13', '31', '23', '29', '30', '18', '17'"},
}

TPCH_QUERIES: dict[int, str] = {n: _TEMPLATES[n].format(**_VALIDATION[n]) for n in _TEMPLATES}

# ---------------------------------------------------------------- substitution (spec §2.4, §4.2.2.13)

REGIONS = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"]
NATIONS = {  # nation: region
    "ALGERIA": "AFRICA", "ARGENTINA": "AMERICA", "BRAZIL": "AMERICA", "CANADA": "AMERICA", "EGYPT": "MIDDLE EAST",
    "ETHIOPIA": "AFRICA", "FRANCE": "EUROPE", "GERMANY": "EUROPE", "INDIA": "ASIA", "INDONESIA": "ASIA",
    "IRAN": "MIDDLE EAST", "IRAQ": "MIDDLE EAST", "JAPAN": "ASIA", "JORDAN": "MIDDLE EAST", "KENYA": "AFRICA",
    "MOROCCO": "AFRICA", "MOZAMBIQUE": "AFRICA", "PERU": "AMERICA", "CHINA": "ASIA", "ROMANIA": "EUROPE",
    "SAUDI ARABIA": "MIDDLE EAST", "VIETNAM": "ASIA", "RUSSIA": "EUROPE", "UNITED KINGDOM": "EUROPE",
    "UNITED STATES": "AMERICA",
}
NATION_KEYS = list(NATIONS)  # n_nationkey = index in this list (dbgen order)
SEGMENTS = ["AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD"]
SHIPMODES = ["REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"]
TYPE_S1 = ["STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO"]
TYPE_S2 = ["ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED"]
TYPE_S3 = ["TIN", "NICKEL", "BRASS", "STEEL", "COPPER"]
CONTAINER_S1 = ["SM", "LG", "MED", "JUMBO", "WRAP"]
CONTAINER_S2 = ["CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM"]
COLORS = ["almond", "antique", "aquamarine", "azure", "beige", "bisque", "black", "blanched", "blue", "blush",
          "brown", "burlywood", "burnished", "chartreuse", "chiffon", "chocolate", "coral", "cornflower", "cornsilk",
          "cream", "cyan", "dark", "deep", "dim", "dodger", "drab", "firebrick", "floral", "forest", "frosted",
          "gainsboro", "ghost", "goldenrod", "green", "grey", "honeydew", "hot", "indian", "ivory", "khaki",
          "lace", "lavender", "lawn", "lemon", "light", "lime", "linen", "magenta", "maroon", "medium", "metallic",
          "midnight", "mint", "misty", "moccasin", "navajo", "navy", "olive", "orange", "orchid", "pale",
          "papaya", "peach", "peru", "pink", "plum", "powder", "puff", "purple", "red", "rose", "rosy", "royal",
          "saddle", "salmon", "sandy", "seashell", "sienna", "sky", "slate", "smoke", "snow", "spring", "steel",
          "tan", "thistle", "tomato", "turquoise", "violet", "wheat", "white", "yellow"]
Q13_WORD1 = ["special", "pending", "unusual", "express"]
Q13_WORD2 = ["packages", "requests", "accounts", "deposits"]


def _month_start(rng: random.Random, first: tuple[int, int], last: tuple[int, int]) -> str:
    months = (last[0] - first[0]) * 12 + (last[1] - first[1])
    k = rng.randint(0, months)
    y, m = divmod(first[1] - 1 + k, 12)
    return dt.date(first[0] + y, m + 1, 1).isoformat()


def _brand(rng: random.Random) -> str:
    return f"Brand#{rng.randint(1, 5)}{rng.randint(1, 5)}"


def _params(template: int, rng: random.Random) -> dict[str, object]:
    if template == 1:
        return {"delta": rng.randint(60, 120)}
    if template == 2:
        return {"size": rng.randint(1, 50), "type": rng.choice(TYPE_S3), "region": rng.choice(REGIONS)}
    if template == 3:
        return {"segment": rng.choice(SEGMENTS), "date": dt.date(1995, 3, rng.randint(1, 31)).isoformat()}
    if template == 4:
        return {"date": _month_start(rng, (1993, 1), (1997, 10))}
    if template == 5:
        return {"region": rng.choice(REGIONS), "date": f"{rng.randint(1993, 1997)}-01-01"}
    if template == 6:
        return {"date": f"{rng.randint(1993, 1997)}-01-01", "discount": f"0.0{rng.randint(2, 9)}",
                "quantity": rng.randint(24, 25)}
    if template == 7:
        n1, n2 = rng.sample(NATION_KEYS, 2)
        return {"nation1": n1, "nation2": n2}
    if template == 8:
        nation = rng.choice(NATION_KEYS)
        return {"nation": nation, "region": NATIONS[nation],
                "type": f"{rng.choice(TYPE_S1)} {rng.choice(TYPE_S2)} {rng.choice(TYPE_S3)}"}
    if template == 9:
        return {"color": rng.choice(COLORS)}
    if template == 10:
        return {"date": _month_start(rng, (1993, 2), (1995, 1))}
    if template == 11:
        return {"nation": rng.choice(NATION_KEYS), "fraction": "0.0001"}  # 0.0001 / SF at SF 1
    if template == 12:
        m1, m2 = rng.sample(SHIPMODES, 2)
        return {"shipmode1": m1, "shipmode2": m2, "date": f"{rng.randint(1993, 1997)}-01-01"}
    if template == 13:
        return {"word1": rng.choice(Q13_WORD1), "word2": rng.choice(Q13_WORD2)}
    if template == 14:
        return {"date": _month_start(rng, (1993, 1), (1997, 12))}
    if template == 15:
        return {"date": _month_start(rng, (1993, 1), (1997, 10))}
    if template == 16:
        m = rng.randint(1, 5)
        return {"brand": f"Brand#{m}{rng.randint(1, 5)}", "type": f"{rng.choice(TYPE_S1)} {rng.choice(TYPE_S2)}",
                "sizes": ", ".join(str(s) for s in rng.sample(range(1, 51), 8))}
    if template == 17:
        return {"brand": _brand(rng), "container": f"{rng.choice(CONTAINER_S1)} {rng.choice(CONTAINER_S2)}"}
    if template == 18:
        return {"quantity": rng.randint(312, 315)}
    if template == 19:
        return {"brand1": _brand(rng), "brand2": _brand(rng), "brand3": _brand(rng),
                "quantity1": rng.randint(1, 10), "quantity2": rng.randint(10, 20), "quantity3": rng.randint(20, 30)}
    if template == 20:
        return {"color": rng.choice(COLORS), "date": f"{rng.randint(1993, 1997)}-01-01",
                "nation": rng.choice(NATION_KEYS)}
    if template == 21:
        return {"nation": rng.choice(NATION_KEYS)}
    if template == 22:
        codes = rng.sample(range(10, 35), 7)  # country codes 10..34 (nationkey + 10)
        return {"codes": ", ".join(f"'{c}'" for c in codes)}
    raise ValueError(f"TPC-H has templates 1..22, not {template}")


def tpch_query(template: int, rng: random.Random | None = None) -> str:
    """One query of a template: validation parameters without rng, random ones with it."""
    params = _VALIDATION[template] if rng is None else _params(template, rng)
    return _TEMPLATES[template].format(**params)


def tpch_workload(n_per_template: int, seed: int = 0, templates: list[int] | None = None) -> list[tuple[int, str]]:
    """n_per_template queries per template with parameters drawn by the spec's rules."""
    rng = random.Random(seed)
    out = []
    for template in templates or list(range(1, 23)):
        for _ in range(n_per_template):
            out.append((template, tpch_query(template, rng)))
    return out
