"""Synthetic traces of any size with injected faults whose counts are known
(for the benchmark and for checking the audit at scale; not a simulator).

One run "gen", one subscriber "sub" at QoS 2, devices d00000.. with QoS
device % 3 and fault profile none/lossy/flaky by (device // 3) % 3, one
message a second each. Faults: loss (QoS 0 1 % on faulty links; QoS >= 1
0.01 % on lossy links, a real violation), duplicates with DUP set (0.2 % of
QoS >= 1 on faulty links, delivered after the device's other messages),
adjacent swaps in arrival order (0.1 % on flaky links), and deliveries 20 s
late on QoS 1 messages sent with a 10 s expiry (0.01 %)."""
import os

import numpy as np

from .traces import write_arrow

RUN = "gen"
SUBSCRIBER = "sub"
T0 = 1767225600000
PROFILES = ("none", "lossy", "flaky")
EXPIRY_S = 10
CHUNK_ROWS = 1000000


def generate(out, rows, devices=1000, seed=1):
    """Write about `rows` published (and as many received) rows under
    out/run=gen/; returns the exact counts the audit must find."""
    rng = np.random.default_rng(seed)
    per_dev = max(1, rows // devices)
    per_chunk = max(1, CHUNK_ROWS // per_dev)
    expect = dict.fromkeys(("published", "received", "lost", "lost_qos1", "lost_qos2",
                            "duplicates", "duplicates_qos2", "dup_flagged", "order_violations", "late_expiry"), 0)
    arrival = 0
    for i, first in enumerate(range(0, devices, per_chunk)):
        n_dev = min(per_chunk, devices - first)
        arrival = _chunk(out, i, rng, first, n_dev, per_dev, arrival, expect)
    return expect


def _chunk(out, part, rng, first, n_dev, m, arrival, expect):
    n = n_dev * m
    dev = np.repeat(np.arange(first, first + n_dev), m)
    seq = np.tile(np.arange(m, dtype=np.int64), n_dev)
    qos = (dev % 3).astype(np.int8)
    prof = (dev // 3) % 3
    faulty = prof > 0
    t_pub = T0 + seq * 1000 + dev % 1000
    lat = (rng.exponential(15.0, n) + 2).astype(np.int64)
    expiry = qos == 1
    late = expiry & (rng.random(n) < 1e-4)
    lat[late] += 20000
    loss_p = np.where(qos == 0, np.where(faulty, 0.01, 0.0), np.where(prof == 1, 1e-4, 0.0))
    lost = rng.random(n) < loss_p
    dup = ~lost & (qos > 0) & faulty & (rng.random(n) < 0.002)

    # Arrival order: each device's delivered messages in seq order, with
    # disjoint adjacent pairs swapped, then all duplicate copies.
    order = np.flatnonzero(~lost)
    d = dev[order]
    start = np.r_[0, np.flatnonzero(d[1:] != d[:-1]) + 1]
    rank = np.arange(len(order)) - np.repeat(start, np.diff(np.r_[start, len(order)]))
    pair = (rank % 2 == 0) & np.r_[d[1:] == d[:-1], False]
    swap = np.flatnonzero(pair & (prof[order] == 2) & (rng.random(len(order)) < 1e-3))
    order[swap], order[swap + 1] = order[swap + 1], order[swap].copy()
    copies = np.flatnonzero(dup)
    idx = np.r_[order, copies]
    is_copy = np.r_[np.zeros(len(order), bool), np.ones(len(copies), bool)]

    names = np.array(["d%05d" % k for k in range(first, first + n_dev)], dtype=object)
    device = names[dev - first]
    topic = np.array(["fleet/%s/temp" % s for s in names], dtype=object)[dev - first]
    acked = qos > 0
    base = os.path.join(out, "run=%s" % RUN)
    write_arrow({
        "run_id": np.full(n, RUN, dtype=object), "device": device,
        "runtime": np.full(n, "cpython", dtype=object),
        "fault_profile": np.array(PROFILES, dtype=object)[prof], "mqtt_version": np.full(n, 5),
        "topic": topic, "qos": qos, "retain": np.zeros(n, bool), "seq": seq,
        "packet_id": _masked(seq % 65535 + 1, acked), "t_pub_ms": t_pub,
        "t_ack_ms": _masked(t_pub + 5, acked), "attempts": np.ones(n, np.int16),
        "reason_code": _masked(np.zeros(n, np.int16), acked),
        "expiry_s": _masked(np.full(n, EXPIRY_S), expiry),
        "outcome": np.where(acked, "acked", "sent").astype(object),
    }, "published", os.path.join(base, "published", "part-%05d.parquet" % part))
    k = len(idx)
    value = 20 + 5 * np.sin(seq[idx] / 50.0) + rng.normal(0, 0.2, k)
    write_arrow({
        "run_id": np.full(k, RUN, dtype=object), "subscriber": np.full(k, SUBSCRIBER, dtype=object),
        "sub_qos": np.full(k, 2), "device": device[idx], "seq": seq[idx], "topic": topic[idx],
        "qos": qos[idx], "dup": is_copy, "retain": np.zeros(k, bool),
        "arrival": arrival + np.arange(k), "t_device_ms": t_pub[idx],
        "t_recv_ms": t_pub[idx] + lat[idx] + np.where(is_copy, 50, 0),
        "expiry_left_s": _masked(np.full(k, EXPIRY_S), expiry[idx]),
        "sensor": np.full(k, "temp", dtype=object), "value": value,
        "payload_bytes": np.full(k, 72),
    }, "received", os.path.join(base, "received", "part-%05d.parquet" % part))
    expect["published"] += n
    expect["received"] += k
    expect["lost"] += int(lost.sum())
    expect["lost_qos1"] += int((lost & (qos == 1)).sum())
    expect["lost_qos2"] += int((lost & (qos == 2)).sum())
    expect["duplicates"] += len(copies)
    expect["duplicates_qos2"] += int((dup & (qos == 2)).sum())
    expect["dup_flagged"] += len(copies)
    expect["order_violations"] += len(swap)
    expect["late_expiry"] += int((late & ~lost).sum())
    return arrival + k


def _masked(values, keep):
    """A column that is null where keep is False."""
    import pyarrow as pa
    return pa.array(values, mask=~keep)
