"""Hand-built trace rows for the pipeline tests, written with the shared
schema (host_sim.schema) exactly as host_sim writes them."""
from host_sim import schema
from pipeline.traces import write_arrow

T0 = 1767225600000  # 2026-01-01T00:00:00Z in ms


def pub(run, device, seq, qos, t_pub_ms, outcome="acked", profile="none", expiry_s=None,
        runtime="cpython"):
    return dict(run_id=run, device=device, runtime=runtime, fault_profile=profile,
                mqtt_version=5, topic="fleet/%s/temp" % device, qos=qos, retain=False,
                seq=seq, packet_id=None if qos == 0 else seq + 1, t_pub_ms=t_pub_ms,
                t_ack_ms=t_pub_ms + 5 if outcome == "acked" else None, attempts=1,
                reason_code=0 if outcome == "acked" else None, expiry_s=expiry_s,
                outcome=outcome)


def rcv(run, subscriber, arrival, device, seq, qos, t_recv_ms, t_device_ms=None, sub_qos=2,
        dup=False, value=None, sensor="temp", expiry_left_s=None):
    return dict(run_id=run, subscriber=subscriber, sub_qos=sub_qos, device=device, seq=seq,
                topic="fleet/%s/temp" % device, qos=qos, dup=dup, retain=False,
                arrival=arrival, t_device_ms=t_device_ms, t_recv_ms=t_recv_ms,
                expiry_left_s=expiry_left_s, sensor=sensor if device else None,
                value=value, payload_bytes=80)


def columns(rows, table):
    return {n: [r[n] for r in rows] for n in schema.names(schema.TABLES[table])}


def write_run(traces, run, published, received, parts=1):
    """Write one run's tables under traces/run=<run>/ (received split into
    `parts` files, as an appending collector would)."""
    base = "%s/run=%s" % (traces, run)
    if published:
        write_arrow(columns(published, "published"), "published",
                    base + "/published/part-0.parquet")
    for i in range(parts):
        chunk = received[i::parts]
        if chunk:
            write_arrow(columns(chunk, "received"), "received",
                        base + "/received/part-%d.parquet" % i)
