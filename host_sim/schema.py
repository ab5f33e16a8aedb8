"""The trace tables host_sim writes and pipeline/ reads: one definition for both.

A run writes Parquet under ``traces/run=<run_id>/``:

- ``published/``: one row per telemetry message a device handed to its client.
- ``received/``: one row per PUBLISH a subscriber (or ``pipeline collect``) got.
- ``run.json``: scenario name, seed, start time, devices and fault profiles.

Columns are ``(name, type, nullable)`` with type one of the names in ``TYPES``;
``arrow_schema(...)`` and ``spark_schema(...)`` build the concrete schemas so the
writer (pyarrow) and the reader (Spark) cannot drift apart. Times are integer
milliseconds since the Unix epoch (UTC); ``arrival`` is a per-subscriber counter
that orders receive events where millisecond timestamps tie.

The telemetry payload every simulated device and the board firmware send is
compact JSON (content type ``application/json``), see ``encode_payload``:
``{"dev": "d001", "seq": 42, "ts": 1732300000123, "sensor": "temp", "value": 21.5}``
"""
import json

TYPES = ("string", "int8", "int16", "int32", "int64", "double", "bool")

PUBLISHED = (
    ("run_id", "string", False),
    ("device", "string", False),        # client id of the publishing device
    ("runtime", "string", False),       # "cpython" or "micropython"
    ("fault_profile", "string", False), # name of the link fault profile ("none" if clean)
    ("mqtt_version", "int8", False),    # 4 (3.1.1) or 5
    ("topic", "string", False),
    ("qos", "int8", False),
    ("retain", "bool", False),
    ("seq", "int64", False),            # per-device sequence number, from 0, no gaps
    ("packet_id", "int32", True),       # null at QoS 0
    ("t_pub_ms", "int64", False),       # device clock when publish() was called
    ("t_ack_ms", "int64", True),        # when PUBACK / PUBCOMP arrived; null if never
    ("attempts", "int16", False),       # times the PUBLISH was sent (1 + resends with DUP=1)
    ("reason_code", "int16", True),     # final ack reason code; null at QoS 0 or no ack
    ("expiry_s", "int32", True),        # MQTT 5 Message Expiry Interval sent, null if none
    ("outcome", "string", False),       # sent (QoS 0) | acked | refused | expired | lost_session | pending
)

RECEIVED = (
    ("run_id", "string", False),
    ("subscriber", "string", False),    # client id of the receiving subscriber
    ("sub_qos", "int8", False),         # QoS of the subscription
    ("device", "string", True),         # from the payload; null if the payload did not parse
    ("seq", "int64", True),
    ("topic", "string", False),
    ("qos", "int8", False),             # QoS of the delivered PUBLISH
    ("dup", "bool", False),
    ("retain", "bool", False),
    ("arrival", "int64", False),        # per-subscriber arrival counter, from 0
    ("t_device_ms", "int64", True),     # "ts" from the payload
    ("t_recv_ms", "int64", False),      # subscriber clock at delivery
    ("expiry_left_s", "int32", True),   # Message Expiry Interval as delivered, null if none
    ("sensor", "string", True),
    ("value", "double", True),
    ("payload_bytes", "int32", False),
)

TABLES = {"published": PUBLISHED, "received": RECEIVED}


def names(table):
    return [c[0] for c in table]


def arrow_schema(table):
    import pyarrow as pa
    types = {"string": pa.string(), "int8": pa.int8(), "int16": pa.int16(),
             "int32": pa.int32(), "int64": pa.int64(), "double": pa.float64(),
             "bool": pa.bool_()}
    return pa.schema([pa.field(n, types[t], nullable=null) for n, t, null in table])


def spark_schema(table):
    from pyspark.sql import types as T
    types = {"string": T.StringType(), "int8": T.ByteType(), "int16": T.ShortType(),
             "int32": T.IntegerType(), "int64": T.LongType(), "double": T.DoubleType(),
             "bool": T.BooleanType()}
    return T.StructType([T.StructField(n, types[t], null) for n, t, null in table])


def encode_payload(device, seq, ts_ms, sensor, value):
    """The telemetry payload as bytes (same format on the device firmware)."""
    return json.dumps({"dev": device, "seq": seq, "ts": ts_ms, "sensor": sensor,
                       "value": value}).encode()


def decode_payload(payload):
    """(device, seq, ts_ms, sensor, value) from a payload, or None if it is not
    telemetry (a subscriber then records the row with null payload columns)."""
    try:
        d = json.loads(bytes(payload))
        return d["dev"], int(d["seq"]), int(d["ts"]), d.get("sensor"), d.get("value")
    except (ValueError, KeyError, TypeError):
        return None
