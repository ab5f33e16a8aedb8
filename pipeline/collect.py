"""Live collection: subscribe with the project's own client and append what
arrives as Parquet files of the `received` schema, acknowledging each QoS 1
message only after the file holding it is on disk (at-least-once: a crash
before the write makes the broker send the message again).

Files go to OUT/run=<run_id>/received/part-<ms>-<n>.parquet, where the audit,
the analytics and the streaming job read them."""
import glob
import os
import time

from frugalmqtt.props import MESSAGE_EXPIRY
from host_sim import schema
from tqdm import tqdm

from .broker import BrokerError
from .traces import write_arrow


def received_row(msg, run_id, subscriber, arrival, now_ms):
    """One `received` row (a tuple in schema order) for a delivered message
    (a frugalmqtt session.Message, valid only inside on_message)."""
    payload = bytes(msg.payload)
    device, seq, ts, sensor, value = schema.decode_payload(payload) or (None,) * 5
    return (run_id, subscriber, 1, device, seq, bytes(msg.topic).decode(), msg.qos,
            bool(msg.dup), bool(msg.retain), arrival, ts, now_ms,
            msg.props.get_int(MESSAGE_EXPIRY, None), sensor,
            float(value) if isinstance(value, (int, float)) else None, len(payload))


class Collector:
    def __init__(self, broker, topic, out, run_id="live", client_id="pipeline-collect",
                 batch=500, idle_ms=200, max_age_ms=2000, max_packet=4096):
        """`broker` is a pipeline.broker.Broker (address, credentials, TLS)."""
        self.broker = broker
        self.topic = topic
        self.run_id = run_id
        self.client_id = client_id
        self.batch = batch
        self.idle_ms = idle_ms
        self.max_age_ms = max_age_ms
        self.dir = os.path.join(out, "run=%s" % run_id, "received")
        # Persistent session (clean=False): what arrives while we are away waits
        # at the broker. Receive Maximum = batch: the broker may leave a whole
        # batch unacknowledged with us.
        self.client = broker.client(client_id, clean=False, max_packet=max_packet, inbound=batch)
        self.client.s.manual_ack = True
        self.client.on_message = self._on_message
        self.names = schema.names(schema.RECEIVED)
        self.rows = []
        self.pids = []  # (connection, packet id) of QoS 1 rows not yet acknowledged
        self.arrival = self._next_arrival()
        self.files = 0
        self.written = 0
        self.first_ms = self.last_ms = 0

    def _next_arrival(self):
        """Continue this subscriber's arrival counter across restarts."""
        import pyarrow.dataset as ds
        files = glob.glob(os.path.join(self.dir, "*.parquet"))
        if not files:
            return 0
        t = ds.dataset(files, schema=schema.arrow_schema(schema.RECEIVED)).to_table(
            columns=["arrival"], filter=ds.field("subscriber") == self.client_id)
        return (max(t.column("arrival").to_pylist()) + 1) if t.num_rows else 0

    def _on_message(self, msg):
        now = int(time.time() * 1000)
        self.rows.append(received_row(msg, self.run_id, self.client_id, self.arrival, now))
        self.arrival += 1
        if msg.qos == 1:
            self.pids.append((self.client.sock, msg.pid))  # a new socket per connection
        if not self.first_ms:
            self.first_ms = now
        self.last_ms = now

    def pending(self):
        return len(self.rows)

    def flush(self):
        """Write the batch as one file, then acknowledge its QoS 1 messages
        (those of an earlier connection the broker resends anyway)."""
        n = self.pending()
        if not n:
            return 0
        name = "part-%d-%s-%05d.parquet" % (int(time.time() * 1000), self.client_id, self.files)
        columns = {k: list(v) for k, v in zip(self.names, zip(*self.rows))}
        write_arrow(columns, "received", os.path.join(self.dir, name))
        for conn, pid in self.pids:
            if conn is self.client.sock and self.client.connected:
                self.client.ack(pid)
        self.pids = []
        self.rows = []
        self.files += 1
        self.written += n
        self.first_ms = 0
        return n

    def due(self, now):
        n = self.pending()
        return n and (n >= self.batch or now - self.last_ms >= self.idle_ms
                      or now - self.first_ms >= self.max_age_ms)

    def run(self, duration_s=0, count=0, progress=False):
        """Collect until duration_s passed or count rows are written (0: no
        limit); returns the rows written. Raises BrokerError (one line) when
        the broker cannot be reached or refuses us; `progress` shows the rows
        written so far on stderr."""
        c = self.client
        if not self.broker.connect(c):
            subscribe(self.broker, c, self.topic)  # no session at the broker yet
        end = time.time() + duration_s if duration_s else None
        bar = tqdm(total=count or None, unit=" rows", desc="collect %s" % self.topic,
                   disable=not progress, mininterval=0.5)
        try:
            while (end is None or time.time() < end) and not (count and self.written >= count):
                c.poll(min(self.idle_ms, 100))
                if self.due(int(time.time() * 1000)):
                    bar.update(self.flush())
            bar.update(self.flush())
        finally:
            bar.close()
            c.disconnect()
        return self.written


def subscribe(broker, client, topic):
    """Subscribe at QoS 1; a refusal (e.g. the broker's ACL) is a BrokerError."""
    code = client.subscribe(topic, qos=1)
    if code >= 0x80:
        raise BrokerError("broker %s refused the subscription to %s (reason code 0x%02x)"
                          % (broker.address, topic, code))
