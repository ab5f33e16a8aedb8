"""The delivery audit of pipeline/audit.py written for DuckDB: the
single-machine reference `make bench` sets beside Spark. Same definitions
(see pipeline/audit.py); returns the same tables as lists of dicts."""
import duckdb

FACTS = """
CREATE TEMP TABLE facts AS
WITH r AS (
  SELECT *, row_number() OVER (PARTITION BY run_id, subscriber, device, topic, seq
                               ORDER BY arrival) = 1 AS first
  FROM rcv WHERE device IS NOT NULL AND seq IS NOT NULL),
o AS (
  SELECT run_id, subscriber, device, topic, seq,
         coalesce(seq < max(seq) OVER (PARTITION BY run_id, subscriber, device, topic, qos
                  ORDER BY arrival ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
                  false) AS out_of_order
  FROM r WHERE first),
m AS (
  SELECT run_id, subscriber, device, topic, seq, count(*) AS deliveries,
         sum(dup::INT) AS dup_flagged, arg_min(t_recv_ms, arrival) AS first_recv_ms,
         max(t_recv_ms) AS last_recv_ms, max(qos) AS recv_qos, max(sub_qos) AS recv_sub_qos
  FROM r GROUP BY ALL),
subs AS (SELECT run_id, subscriber, max(sub_qos) AS sub_qos FROM rcv GROUP BY ALL),
e AS (
  SELECT p.run_id, coalesce(s.subscriber, '(none)') AS subscriber, p.device, p.topic, p.seq,
         p.runtime, p.fault_profile, p.outcome, p.t_pub_ms, p.expiry_s, p.qos AS pub_qos,
         s.sub_qos
  FROM pub p LEFT JOIN subs s USING (run_id)),
j AS (
  SELECT * FROM e FULL OUTER JOIN (m LEFT JOIN o USING (run_id, subscriber, device, topic, seq))
  USING (run_id, subscriber, device, topic, seq)),
k AS (
  SELECT *, pub_qos IS NOT NULL AS published, coalesce(deliveries, 0) AS n,
         (pub_qos = 0 AND outcome = 'sent') OR (pub_qos >= 1 AND outcome = 'acked') AS promised
  FROM j)
SELECT run_id, subscriber, device, topic, seq,
       coalesce(least(pub_qos, coalesce(sub_qos, pub_qos)),
                least(recv_qos, recv_sub_qos))::INT AS qos,
       coalesce(runtime, '(unknown)') AS runtime,
       coalesce(fault_profile, '(unknown)') AS fault_profile,
       published,
       coalesce(published AND promised, false) AS promised,
       n > 0 AS delivered,
       coalesce(published AND promised AND n = 0, false) AS lost,
       greatest(n - 1, 0) AS duplicates,
       coalesce(dup_flagged, 0) AS dup_flagged,
       coalesce(out_of_order, false) AS out_of_order,
       coalesce(published AND n > 0
                AND last_recv_ms > t_pub_ms + expiry_s::BIGINT * 1000 + {slack}, false)
         AS late_expiry,
       first_recv_ms - t_pub_ms AS latency_ms,
       NOT published AS stray
FROM k
"""

SUMMARY = """
SELECT {keys},
  sum(published::BIGINT) AS published, sum(promised::BIGINT) AS promised,
  sum((delivered AND published)::BIGINT) AS delivered, sum(lost::BIGINT) AS lost,
  sum(duplicates) AS duplicates, sum(out_of_order::BIGINT) AS order_violations,
  sum(late_expiry::BIGINT) AS late_expiry, sum(dup_flagged) AS dup_flagged,
  sum(stray::BIGINT) AS stray,
  quantile_cont(latency_ms, 0.5) AS lat_p50_ms, quantile_cont(latency_ms, 0.95) AS lat_p95_ms,
  quantile_cont(latency_ms, 0.99) AS lat_p99_ms, max(latency_ms) AS lat_max_ms
FROM facts GROUP BY {keys} ORDER BY {keys}
"""

LEVELS = {"run": "run_id", "qos": "run_id, qos", "profile": "run_id, fault_profile, qos",
          "device": "run_id, device, runtime, fault_profile",
          "violations": "run_id, subscriber, qos"}


def audit(traces, expiry_slack_ms=1000, threads=None):
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    if threads:
        con.execute("SET threads = %d" % threads)
    for view, table in (("pub", "published"), ("rcv", "received")):
        con.execute("CREATE VIEW %s AS SELECT * FROM read_parquet('%s/run=*/%s/*.parquet', "
                    "hive_partitioning = false)" % (view, traces.rstrip("/"), table))
    con.execute(FACTS.format(slack=int(expiry_slack_ms)))
    out = {}
    for level, keys in LEVELS.items():
        cur = con.execute(SUMMARY.format(keys=keys))
        cols = [d[0] for d in cur.description]
        out[level] = [dict(zip(cols, row)) for row in cur.fetchall()]
    con.close()
    return out
