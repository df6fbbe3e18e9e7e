"""Three applications that are not pgbench's, captured while they run and replayed by
``pgaccel run`` against the server's defaults and PGTune (issue 66): does the plan made from
each capture's measured profile hold up?

* ``shop``: an order-management application (customers, products, orders, order items):
  point lookups, a customer's recent orders, an order's lines and a checkout transaction
  (INSERT ... RETURNING, a multi-row INSERT, an UPDATE) take the calls; two reporting
  joins of about a second (revenue by region over ``now() - $1 * interval '1 hour'``, the
  top products of the last 30 days) take the time.  The issue's mixed workload.
* ``warehouse``: an analytic mix over a sales star (dates, stores, items, 3M sales rows):
  eight reporting queries of 0.3-3 s (grouping, a window function, a percentile, a
  year-over-year self-join, COUNT(DISTINCT)), two clients.
* ``telemetry``: a write-heavy ingest: batches of 20 readings per INSERT, device updates,
  the latest reading of a device, its hourly average, a dashboard of the last 5 seconds
  by site now and then.

Keys are skewed (a few customers, items and devices take most calls).  For each app:
a throwaway PostgreSQL with pg_stat_statements, the data loaded, the app driven by its
clients while ``pgaccel capture --data dump`` records a window, then
``pgaccel run --workloads captured:DIR --with-pgtune`` (and ``tune --from-capture`` to
show the profile).  Printed: the profile, the plan's verdicts against the defaults and
PGTune with their intervals, and the commands.

Usage:  python benchmarks/plan_apps.py [--apps shop,warehouse,telemetry] [--capture 90]
        [--budget 20m] [--work DIR] [--only-capture] [--bundles DIR (reuse captures)]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable

import psycopg

from pgaccel.server.cluster import Cluster
from pgaccel.server.discovery import find_installations


def skew(rng: random.Random, n: int) -> int:
    """1..n, low keys far more often (about a third of draws in the lowest 5%)."""
    return min(n, int(n * rng.random() ** 3) + 1)


# -- shop: the mixed application -------------------------------------------------------------

SHOP_LOAD = [
    "CREATE TABLE customers (id bigserial PRIMARY KEY, email text NOT NULL UNIQUE, "
    "region text NOT NULL, created_at timestamptz NOT NULL)",
    "CREATE TABLE products (id serial PRIMARY KEY, name text NOT NULL, category text NOT "
    "NULL, price numeric(10,2) NOT NULL, stock integer NOT NULL)",
    "CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id bigint NOT NULL REFERENCES "
    "customers, status text NOT NULL, created_at timestamptz NOT NULL, total numeric(12,2))",
    "CREATE TABLE order_items (order_id bigint NOT NULL REFERENCES orders, product_id "
    "integer NOT NULL REFERENCES products, qty integer NOT NULL, price numeric(10,2) NOT NULL)",
    "SELECT setseed(0.66)",
    "INSERT INTO customers (email, region, created_at) SELECT 'c' || i || '@example.com', "
    "(ARRAY['north','south','east','west','central','coast','alps','lakes','plains',"
    "'islands','valley','metro'])[1 + i % 12], now() - random() * interval '900 days' "
    "FROM generate_series(1, 200000) i",
    "INSERT INTO products (name, category, price, stock) SELECT 'product ' || i, "
    "'cat' || (i % 40), round((5 + random() * 200)::numeric, 2), 1000000 "
    "FROM generate_series(1, 20000) i",
    "INSERT INTO orders (customer_id, status, created_at, total) SELECT "
    "1 + (199999 * random() ^ 3)::int, (ARRAY['new','paid','shipped','done'])[1 + i % 4], "
    "now() - random() * interval '365 days', 0 FROM generate_series(1, 1500000) i",
    "INSERT INTO order_items SELECT o.id, 1 + (19999 * random() ^ 2)::int, 1 + "
    "(random() * 4)::int, round((5 + random() * 200)::numeric, 2) "
    "FROM orders o, generate_series(1, 3)",
    "CREATE INDEX ON orders (customer_id, created_at)",
    "CREATE INDEX ON order_items (order_id)",
    "VACUUM ANALYZE",
]


def shop_client(conn: psycopg.Connection, rng: random.Random) -> None:
    x = rng.random()
    if x < 0.42:
        conn.execute("SELECT id, email, region FROM customers WHERE id = %s",
                     (skew(rng, 200000),)).fetchall()
    elif x < 0.66:
        conn.execute("SELECT id, status, total, created_at FROM orders WHERE customer_id = "
                     "%s ORDER BY created_at DESC LIMIT 10", (skew(rng, 200000),)).fetchall()
    elif x < 0.86:
        conn.execute("SELECT oi.product_id, p.name, oi.qty, oi.price FROM order_items oi "
                     "JOIN products p ON p.id = oi.product_id WHERE oi.order_id = %s",
                     (rng.randint(1, 1500000),)).fetchall()
    elif x < 0.975:
        with conn.transaction():
            oid = conn.execute("INSERT INTO orders (customer_id, status, created_at, total) "
                               "VALUES (%s, 'new', now(), %s) RETURNING id",
                               (skew(rng, 200000), rng.randint(10, 500))).fetchone()[0]
            a, b = skew(rng, 20000), skew(rng, 20000)
            conn.execute("INSERT INTO order_items (order_id, product_id, qty, price) VALUES "
                         "(%s, %s, %s, %s), (%s, %s, %s, %s)",
                         (oid, a, 1, 9.5, oid, b, 2, 19.0))
            conn.execute("UPDATE products SET stock = stock - %s WHERE id = %s", (1, a))
    elif x < 0.99:
        conn.execute("SELECT c.region, count(*), sum(oi.qty * oi.price) FROM orders o JOIN "
                     "order_items oi ON oi.order_id = o.id JOIN customers c ON c.id = "
                     "o.customer_id WHERE o.created_at > now() - %s * interval '1 hour' "
                     "GROUP BY c.region ORDER BY 3 DESC", (24 * 45,)).fetchall()
    else:
        conn.execute("SELECT p.category, p.name, sum(oi.qty) AS units FROM order_items oi "
                     "JOIN orders o ON o.id = oi.order_id JOIN products p ON p.id = "
                     "oi.product_id WHERE o.created_at > now() - interval '30 days' "
                     "GROUP BY p.category, p.name ORDER BY units DESC LIMIT 20").fetchall()


# -- warehouse: the analytic mix -------------------------------------------------------------

WAREHOUSE_LOAD = [
    "CREATE TABLE stores (id integer PRIMARY KEY, region text NOT NULL, size text NOT NULL)",
    "CREATE TABLE items (id integer PRIMARY KEY, category text NOT NULL, brand text NOT "
    "NULL, price numeric(10,2) NOT NULL)",
    "CREATE TABLE sales (sold_on date NOT NULL, store_id integer NOT NULL, item_id integer "
    "NOT NULL, qty integer NOT NULL, amount numeric(12,2) NOT NULL)",
    "SELECT setseed(0.67)",
    "INSERT INTO stores SELECT i, 'region ' || (i % 9), (ARRAY['s','m','l'])[1 + i % 3] "
    "FROM generate_series(1, 300) i",
    "INSERT INTO items SELECT i, 'cat ' || (i % 30), 'brand ' || (i % 400), "
    "round((1 + random() * 100)::numeric, 2) FROM generate_series(1, 8000) i",
    "INSERT INTO sales SELECT date '2024-01-01' + (random() * 730)::int, "
    "1 + (299 * random() ^ 2)::int, 1 + (7999 * random() ^ 3)::int, 1 + (random() * 5)::int, "
    "round((1 + random() * 300)::numeric, 2) FROM generate_series(1, 3000000)",
    "CREATE INDEX ON sales (sold_on)",
    "VACUUM ANALYZE",
]

WAREHOUSE_QUERIES = [
    ("SELECT s.region, date_trunc('month', x.sold_on) AS m, sum(x.amount) FROM sales x "
     "JOIN stores s ON s.id = x.store_id WHERE x.sold_on >= %s::date "
     "AND x.sold_on < %s::date + interval '1 year' GROUP BY 1, 2 ORDER BY 1, 2",
     lambda r: (f"{r.choice((2024, 2025))}-01-01", f"{r.choice((2024, 2025))}-01-01")),
    ("SELECT i.id, i.brand, sum(x.amount) AS revenue FROM sales x JOIN items i ON i.id = "
     "x.item_id WHERE x.sold_on BETWEEN %s AND %s GROUP BY i.id, i.brand "
     "ORDER BY revenue DESC LIMIT 50",
     lambda r: ((d := f"2025-{r.choice(('01', '04', '07', '10'))}-01"), d[:5] + "12-31")),
    ("SELECT store_id, count(DISTINCT item_id) FROM sales WHERE sold_on > %s GROUP BY "
     "store_id", lambda r: (f"2024-{r.randint(1, 12):02d}-01",)),
    ("SELECT d, region, amount, avg(amount) OVER (PARTITION BY region ORDER BY d ROWS 6 "
     "PRECEDING) FROM (SELECT x.sold_on AS d, s.region, sum(x.amount) AS amount FROM sales "
     "x JOIN stores s ON s.id = x.store_id WHERE x.sold_on > date '2025-12-31' - %s "
     "GROUP BY 1, 2) t ORDER BY region, d", lambda r: (r.choice((90, 180, 365)),)),
    ("SELECT i.brand, sum(x.amount) FROM sales x JOIN items i ON i.id = x.item_id GROUP BY "
     "i.brand HAVING sum(x.amount) > (SELECT avg(amount) * %s FROM sales)",
     lambda r: (r.choice((1000, 2000)),)),
    ("SELECT extract(dow FROM x.sold_on) AS dow, i.category, sum(x.qty) FROM sales x JOIN "
     "items i ON i.id = x.item_id WHERE i.category IN (%s, %s, %s) GROUP BY 1, 2",
     lambda r: tuple(f"cat {r.randint(0, 29)}" for _ in range(3))),
    ("SELECT i.category, percentile_cont(0.5) WITHIN GROUP (ORDER BY x.amount) FROM sales x "
     "JOIN items i ON i.id = x.item_id WHERE x.store_id <= %s GROUP BY i.category",
     lambda r: (r.choice((50, 100, 150)),)),
    ("SELECT a.item_id, a.q, b.q FROM (SELECT item_id, sum(qty) q FROM sales WHERE sold_on "
     "BETWEEN '2024-01-01' AND '2024-12-31' GROUP BY item_id) a JOIN (SELECT item_id, "
     "sum(qty) q FROM sales WHERE sold_on BETWEEN '2025-01-01' AND '2025-12-31' GROUP BY "
     "item_id) b USING (item_id) WHERE b.q > a.q * %s ORDER BY b.q - a.q DESC LIMIT 100",
     lambda r: (r.choice((1.1, 1.2, 1.5)),)),
]


def warehouse_client(conn: psycopg.Connection, rng: random.Random) -> None:
    if rng.random() < 0.3:               # a dimension lookup between reports
        conn.execute("SELECT id, category, brand, price FROM items WHERE id = %s",
                     (skew(rng, 8000),)).fetchall()
        return
    sql, args = rng.choice(WAREHOUSE_QUERIES)
    conn.execute(sql, args(rng)).fetchall()


# -- telemetry: the ingest -------------------------------------------------------------------

TELEMETRY_LOAD = [
    "CREATE TABLE devices (id integer PRIMARY KEY, site text NOT NULL, kind text NOT NULL, "
    "last_seen timestamptz)",
    "CREATE TABLE readings (id bigserial PRIMARY KEY, device_id integer NOT NULL REFERENCES "
    "devices, at timestamptz NOT NULL DEFAULT now(), temp real, humidity real, status "
    "smallint NOT NULL)",
    "SELECT setseed(0.68)",
    "INSERT INTO devices SELECT i, 'site ' || (i % 50), (ARRAY['t','h','th'])[1 + i % 3], "
    "now() FROM generate_series(1, 5000) i",
    "INSERT INTO readings (device_id, at, temp, humidity, status) SELECT 1 + "
    "(4999 * random() ^ 2)::int, now() - random() * interval '2 days', 15 + random() * 10, "
    "random() * 100, 0 FROM generate_series(1, 600000)",
    "CREATE INDEX ON readings (device_id, at)",
    "CREATE INDEX ON readings (at)",
    "VACUUM ANALYZE",
]
BATCH = 20
INSERT_BATCH = ("INSERT INTO readings (device_id, temp, humidity, status) VALUES "
                + ", ".join(["(%s, %s, %s, %s)"] * BATCH))


def telemetry_client(conn: psycopg.Connection, rng: random.Random) -> None:
    x = rng.random()
    if x < 0.70:
        args = []
        for _ in range(BATCH):
            args += [skew(rng, 5000), round(15 + rng.random() * 10, 2),
                     round(rng.random() * 100, 1), 0]
        conn.execute(INSERT_BATCH, args)
    elif x < 0.85:
        conn.execute("UPDATE devices SET last_seen = now() WHERE id = %s", (skew(rng, 5000),))
    elif x < 0.985:
        conn.execute("SELECT at, temp, humidity FROM readings WHERE device_id = %s ORDER BY "
                     "at DESC LIMIT 1", (skew(rng, 5000),)).fetchall()
    elif x < 0.9997:
        conn.execute("SELECT avg(temp), max(humidity) FROM readings WHERE device_id = %s AND "
                     "at > now() - interval '1 hour'", (skew(rng, 5000),)).fetchall()
    else:
        conn.execute("SELECT d.site, count(*) FROM readings r JOIN devices d ON d.id = "
                     "r.device_id WHERE r.at > now() - interval '5 seconds' GROUP BY d.site"
                     ).fetchall()


APPS: dict[str, tuple[list[str], Callable, int]] = {
    "shop": (SHOP_LOAD, shop_client, 4),
    "warehouse": (WAREHOUSE_LOAD, warehouse_client, 2),
    "telemetry": (TELEMETRY_LOAD, telemetry_client, 4),
}


def drive(conninfo: str, client: Callable, clients: int, seconds: float) -> dict[str, int]:
    """``clients`` connections running ``client`` until ``seconds`` have passed (autocommit;
    parameters bound by the server, as psycopg 3 does)."""
    done = {"calls": 0, "errors": 0}
    stop = time.monotonic() + seconds

    def one(k: int) -> None:
        rng = random.Random(1000 + k)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            while time.monotonic() < stop:
                try:
                    client(conn, rng)
                    done["calls"] += 1
                except psycopg.Error:
                    done["errors"] += 1
    th = [threading.Thread(target=one, args=(k,)) for k in range(clients)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    return done


def pgaccel(*args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    exe = os.path.join(os.path.dirname(sys.executable), "pgaccel")
    print("$ pgaccel " + " ".join(args), flush=True)
    r = subprocess.run([exe, *args], text=True, capture_output=True, **kw)
    if check and r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-3000:], sep="\n")
        raise SystemExit(f"pgaccel {args[0]}: exit code {r.returncode}")
    return r


def capture_app(name: str, out: str, seconds: float) -> None:
    """Load ``name`` on a throwaway server, drive it, and capture a window of ``seconds``."""
    load, client, clients = APPS[name]
    inst = find_installations()[0]
    with Cluster.create_throwaway(inst) as c:
        c.start({"shared_preload_libraries": "pg_stat_statements",
                 "pg_stat_statements.track_planning": "off"})
        with c.connect() as conn:
            conn.execute(f"CREATE DATABASE {name}")
        ci = c.conninfo(name)
        t0 = time.monotonic()
        with psycopg.connect(ci, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
            for sql in load:
                conn.execute(sql)
            size = conn.execute("SELECT pg_size_pretty(pg_database_size(current_database()))"
                                ).fetchone()[0]
        print(f"{name}: loaded {size} in {time.monotonic() - t0:.0f} s", flush=True)
        # the app runs before and through the window
        th = threading.Thread(target=lambda: print(
            f"{name}: driven", drive(ci, client, clients, seconds + 20)))
        th.start()
        time.sleep(10)
        pgaccel("capture", "--dsn", ci, "--duration", f"{seconds:.0f}s", "--data", "dump",
                "--out", out)
        th.join()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--apps", default="shop,warehouse,telemetry")
    ap.add_argument("--capture", type=float, default=90, help="capture window, seconds")
    ap.add_argument("--budget", default="20m")
    ap.add_argument("--work")
    ap.add_argument("--bundles", help="a directory with earlier captures (APP/)")
    ap.add_argument("--only-capture", action="store_true")
    ap.add_argument("--run-args", default="", help="more arguments for pgaccel run")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="plan-apps-")
    os.makedirs(work, exist_ok=True)
    results = {}
    for name in a.apps.split(","):
        bundle = os.path.join(a.bundles or work, name)
        if not os.path.isdir(bundle):
            capture_app(name, bundle, a.capture)
        print(pgaccel("tune", "--from-capture", bundle).stdout, flush=True)
        if a.only_capture:
            continue
        r = pgaccel("run", "--workloads", f"captured:{bundle}", "--with-pgtune", "--budget",
                    a.budget, "--yes", "--json", *a.run_args.split(), check=False)
        print(r.stdout[-6000:], r.stderr[-6000:], sep="\n", flush=True)
        try:
            results[name] = json.loads(r.stdout[r.stdout.index("{"):])
        except ValueError:
            results[name] = {"exit": r.returncode}
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    print("results:", os.path.join(work, "results.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
