"""A Structured Streaming source, format `mqtt`, on PySpark's Python Data
Source API: rows of the `received` schema straight from the broker, through
the project's own client (frugalmqtt.client.MQTTClient).

    spark.dataSource.register(MQTTDataSource)
    spark.readStream.format("mqtt").options(**options(broker, "fleet/#", "stream-1m"))

At-least-once: the client keeps a persistent session (clean=False, a fixed
client id, a session expiry on MQTT 5), subscribes at QoS 1 and acknowledges
a message only once the micro-batch holding it is committed. Until then the
broker keeps it, and sends it again after a crash or a restart. Downstream
deduplication by message identity drops what comes twice.

When is a batch committed? Spark asks the source for data after offset E
only once every batch up to E has run and is in the query's commit log
(read(start=E)); Spark's commit(E) says the same later, or never when no new
batch follows. Both acknowledge everything up to E (this needs Spark's
default synchronous progress tracking). A batch that was planned
but not committed before a restart is replayed empty: its messages, never
acknowledged, come again from the broker into later batches.

A batch holds at most Receive Maximum messages (option receiveMaximum,
default 1000; a 3.1.1 session gets the broker's own limit, mosquitto's
max_inflight_messages): the broker sends no more until they are
acknowledged. Trigger.AvailableNow (`pipeline stream --once`) reads until
the broker pauses for idleMs (at most drainS seconds).

The reader lives in one Python process beside the driver for the whole
query (SimpleDataSourceStreamReader); the network client is made there,
lazily, because the reader object is pickled on its way. A thread polls the
client, so keep-alive and acknowledgements go on between batches."""
import sys
import threading
import time
from collections import deque

from frugalmqtt.err import MQTTError, ServerError

from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from host_sim import schema

from .broker import Broker, BrokerError
from .collect import received_row, subscribe

ARRIVAL = schema.names(schema.RECEIVED).index("arrival")
RETRY_S, RETRY_MAX_S = 0.25, 5  # reconnect attempts, backing off
ACK_WAIT_S = 0.5  # a trigger waits at most this for the client to acknowledge


def options(broker, topic, client_id, run_id="live", idle_ms=500, receive_max=1000, drain_s=60):
    """The source's options for a Broker (no password: the reader takes it
    from the broker's password file or the environment when it connects)."""
    o = {"host": broker.host, "port": broker.port, "version": broker.version,
         "topic": topic, "clientId": client_id, "runId": run_id, "idleMs": idle_ms,
         "receiveMaximum": receive_max, "drainS": drain_s, "tls": broker.tls}
    for k in ("user", "password_file", "ca", "cert", "key"):
        if getattr(broker, k) is not None:
            o["passwordFile" if k == "password_file" else k] = getattr(broker, k)
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in o.items()}


class MQTTDataSource(DataSource):
    @classmethod
    def name(cls):
        return "mqtt"

    def schema(self):
        return schema.spark_schema(schema.RECEIVED)

    def simpleStreamReader(self, schema):
        return MQTTStreamReader(self.options)


class MQTTStreamReader(SimpleDataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are {"n": messages handed to Spark so far}, counted across
    restarts from the checkpoint; a row's `arrival` is its offset."""

    def __init__(self, opts):
        o = {k.lower(): v for k, v in opts.items()}
        self.broker = Broker(o.get("host", "127.0.0.1"), int(o.get("port", 0)),
                             int(o.get("version", 5)), o.get("user"), o.get("passwordfile"),
                             o.get("tls") == "true", o.get("ca"), o.get("cert"), o.get("key"))
        self.topic = o["topic"]
        self.client_id = o["clientid"]
        self.run_id = o.get("runid", "live")
        self.idle_ms = int(o.get("idlems", 500))
        self.receive_max = int(o.get("receivemaximum", 1000))
        self.drain_s = float(o.get("drains", 60))
        self.link = None        # _Link, made by the first read()
        self.drain_until = 0    # Trigger.AvailableNow: read until the broker pauses
        self.drained = False

    def initialOffset(self):
        return {"n": 0}

    def prepareForTriggerAvailableNow(self):
        self.drain_until = time.monotonic() + self.drain_s

    def read(self, start):
        fresh = self.link is None
        if fresh:
            self.link = _Link(self.broker, self.topic, self.client_id, self.run_id,
                              self.receive_max)
        n = start["n"]
        self.link.ack_through(n)  # every batch up to `start` is committed
        if self.drained:
            return iter(()), start
        if fresh or self.drain_until:
            # What the broker kept for us comes first, in one batch.
            self.link.wait_idle(self.idle_ms, 10 * self.idle_ms)
        rows = [r[:ARRIVAL] + (n + i,) + r[ARRIVAL + 1:] for i, r in enumerate(self.link.take(n))]
        # Trigger.AvailableNow ends at the first pause (or after drain_s).
        self.drained = bool(self.drain_until) and (
            not rows or time.monotonic() > self.drain_until)
        return iter(rows), {"n": n + len(rows)}

    def readBetweenOffsets(self, start, end):
        # Replay of a batch planned before a restart: see the module's notes.
        return iter(())

    def commit(self, end):
        if self.link is not None:
            self.link.ack_through(end["n"])

    def stop(self):
        """Close the connection without DISCONNECT (the session stays at the
        broker, with what was not acknowledged)."""
        if self.link is not None:
            self.link.close()
            self.link = None


class _Link:
    """The client, its connection and the messages between the broker and
    Spark. A daemon thread polls the client and, when the broker is gone,
    reconnects (every RETRY_S at first, backing off to RETRY_MAX_S), saying
    so in one line on stderr when the link goes and one when it is back.
    A trigger never waits for that: while the link is down, read() hands
    Spark what was received before (usually nothing) at once."""

    def __init__(self, broker, topic, client_id, run_id, receive_max):
        self.broker, self.topic = broker, topic
        self.run_id, self.client_id = run_id, client_id
        self.lock = threading.Lock()       # every client call
        self.rows_lock = threading.Lock()  # inbox
        self.inbox = []     # (row, connection, packet id) not yet given to Spark
        self.unacked = deque()  # (offset, connection, packet id) given, not acknowledged
        self.last_rx = time.monotonic()
        self.looked = threading.Event()  # the polling thread's first poll is done
        self.error = None   # what ended the polling thread
        self.closed = False
        c = self.client = broker.client(client_id, clean=False, inbound=receive_max,
                                        max_packet=4096, reconnect=False)
        c.manual_ack = True
        c.on_message = self._on_message
        if not broker.connect(c):
            subscribe(broker, c, topic)  # no session at the broker yet
        threading.Thread(target=self._poll, name="mqtt-" + client_id, daemon=True).start()

    def _on_message(self, msg):
        row = received_row(msg, self.run_id, self.client_id, None, int(time.time() * 1000))
        with self.rows_lock:
            self.inbox.append((row, self.client.sock, msg.pid if msg.qos == 1 else 0))
        self.last_rx = time.monotonic()

    def close(self):
        self.closed = True
        with self.lock:
            self.client.close()

    def _poll(self):
        try:
            while not self.closed:
                try:
                    with self.lock:
                        if self.closed:
                            break
                        self.client.poll(0)
                    self._looked()
                except (OSError, MQTTError, ServerError) as e:  # the link broke (poll closed it)
                    self._looked()
                    if not self.closed:
                        self._reconnect(e)
                time.sleep(0.01)
        except Exception as e:  # not a network error: the next read() raises it
            self.error = e
        finally:
            self._looked()

    def _looked(self):
        """After the first poll: what the broker sent with its CONNACK has
        been read, and wait_idle() counts a pause from now (not from before
        connecting, which may itself take longer than the pause)."""
        if not self.looked.is_set():
            self.last_rx = time.monotonic()
            self.looked.set()

    def _reconnect(self, lost):
        """Connect again, one attempt at a time under the lock, until it works."""
        _say("mqtt source %s: lost the broker %s (%s: %s); reconnecting"
             % (self.client_id, self.broker.address, type(lost).__name__, lost))
        t0, wait = time.monotonic(), RETRY_S
        while not self.closed:
            time.sleep(wait)
            try:
                with self.lock:
                    if not self.broker.connect(self.client):
                        subscribe(self.broker, self.client, self.topic)
                break
            except BrokerError:
                wait = min(wait * 2, RETRY_MAX_S)
        else:
            return
        _say("mqtt source %s: reconnected to %s after %.0f s"
             % (self.client_id, self.broker.address, time.monotonic() - t0))

    def wait_idle(self, idle_ms, most_ms):
        """Wait until nothing has arrived for idle_ms, or most_ms passed (a
        busy fleet never pauses). A full Receive Maximum window pauses too:
        the broker sends no more until we acknowledge. The pause counts from
        the polling thread's first look at the link."""
        end = time.monotonic() + most_ms / 1000
        self.looked.wait(most_ms / 1000)
        while time.monotonic() - self.last_rx < idle_ms / 1000 and time.monotonic() < end:
            time.sleep(idle_ms / 4000)

    def take(self, first):
        """The rows received so far, to be offsets first, first + 1, ...
        (their `arrival` is left None for the caller)."""
        if self.error:
            raise self.error
        with self.rows_lock:
            got, self.inbox = self.inbox, []
            for i, (_, conn, pid) in enumerate(got):
                if pid:
                    self.unacked.append((first + i, conn, pid))
        return [row for row, _, _ in got]

    def ack_through(self, n):
        """PUBACK, in the order received, each message at an offset below n
        (offsets count from 0, so `n` messages), if its connection is the
        current one (the broker resends those of an earlier connection).
        While a reconnect attempt holds the client (at most its connect
        timeout), this leaves them to the next call rather than wait."""
        if not self.lock.acquire(timeout=ACK_WAIT_S):
            return
        try:
            c = self.client
            with self.rows_lock:
                while self.unacked and self.unacked[0][0] < n:
                    _, conn, pid = self.unacked.popleft()
                    if conn is c.sock and c.connected:
                        c.ack(pid)
        finally:
            self.lock.release()


def _say(line):
    print(line, file=sys.stderr, flush=True)
