"""How the pipeline reaches a fleet's broker (`collect` and the `mqtt` stream
source): address, MQTT version, user name and password, TLS with CA
verification and an optional client certificate.

The password never travels on a command line or in Spark options: it is read
from a file (`password_file`) or from the environment (MQTT_PASSWORD), at the
moment of connecting. Every way a connection can fail becomes a BrokerError
with one line saying what went wrong."""
import argparse
import os
import ssl
from dataclasses import dataclass

from frugalmqtt.client import MQTTClient
from frugalmqtt.err import ServerError

PASSWORD_ENV = "MQTT_PASSWORD"

# CONNACK reason codes a refused connection carries (MQTT 5, then 3.1.1's
# return codes 1-5), in words.
_REFUSED = {
    0x80: "unspecified error", 0x81: "malformed packet", 0x82: "protocol error",
    0x83: "implementation specific error", 0x84: "unsupported protocol version",
    0x85: "client identifier not valid", 0x86: "bad user name or password",
    0x87: "not authorized", 0x88: "server unavailable", 0x89: "server busy",
    0x8A: "banned", 0x8C: "bad authentication method", 0x95: "packet too large",
    0x97: "quota exceeded", 0x9F: "connection rate exceeded",
}
_REFUSED_311 = {1: "unsupported protocol version", 2: "client identifier not valid",
                3: "server unavailable", 4: "bad user name or password", 5: "not authorized"}


class BrokerError(Exception):
    """A connection that failed, in one line (str(e))."""


@dataclass(frozen=True)
class Broker:
    host: str = "127.0.0.1"
    port: int = 0               # 0: 1883, or 8883 with TLS
    version: int = 5            # 5 (MQTT 5.0) or 4 (3.1.1)
    user: str = None
    password_file: str = None   # else the MQTT_PASSWORD environment variable, if set
    tls: bool = False           # TLS, verified against the system's CAs unless `ca`
    ca: str = None              # CA certificate file (implies TLS)
    cert: str = None            # client certificate (PEM) where the broker asks for one
    key: str = None             # its private key (PEM), if not in `cert`

    @property
    def address(self):
        return "%s:%d" % (self.host, self.port or (8883 if self.uses_tls else 1883))

    @property
    def uses_tls(self):
        return bool(self.tls or self.ca or self.cert)

    def password(self):
        """The password as bytes, from the file or the environment; None if neither."""
        if self.password_file:
            try:
                with open(self.password_file, "rb") as f:
                    return f.read().rstrip(b"\r\n")
            except OSError as e:
                raise BrokerError("cannot read the password file %s: %s"
                                  % (self.password_file, e.strerror))
        env = os.environ.get(PASSWORD_ENV)
        return env.encode() if env is not None else None

    def credentials(self):
        """Which credentials were offered, in words (never the password)."""
        if self.user is None:
            return "without a user name"
        source = ("from %s" % self.password_file if self.password_file else
                  "from $%s" % PASSWORD_ENV if PASSWORD_ENV in os.environ else None)
        return "as user %s %s" % (self.user, "with the password " + source if source
                                  else "without a password")

    def ssl_context(self):
        """A CPython SSLContext verifying the broker's certificate and host
        name (the client wraps its socket with it), or None without TLS."""
        if not self.uses_tls:
            return None
        try:
            ctx = ssl.create_default_context(cafile=self.ca)
            if self.cert:
                ctx.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as e:
            raise BrokerError("cannot load the TLS files (%s): %s"
                              % (", ".join(f for f in (self.ca, self.cert, self.key) if f),
                                 getattr(e, "strerror", None) or e))
        return ctx

    def client(self, client_id, **kw):
        """A frugalmqtt MQTTClient for this broker (not connected yet)."""
        user = self.user.encode() if self.user is not None else None
        return MQTTClient(client_id, self.host, self.port, version=self.version, user=user,
                          password=self.password(), ssl=self.ssl_context(), **kw)

    def connect(self, client):
        """client.connect(), with any failure turned into a BrokerError.
        Returns session present."""
        try:
            return client.connect()
        except Exception as e:
            raise BrokerError(self.explain(e)) from None

    def explain(self, e):
        """One line for an exception raised while connecting."""
        where = "broker %s" % self.address
        if isinstance(e, ServerError):
            code = e.args[0] if e.args else 0
            words = (_REFUSED if self.version >= 5 else _REFUSED_311).get(code, "refused")
            line = "%s refused the connection: %s (reason code 0x%02x)" % (where, words, code)
            if code in ((0x86, 0x87) if self.version >= 5 else (4, 5)):
                line += " " + self.credentials()
            return line
        if isinstance(e, ssl.SSLCertVerificationError):
            return "TLS with %s: the broker's certificate was not accepted: %s" % (
                where, e.verify_message or e.reason)
        if isinstance(e, ssl.SSLError):
            if "CERTIFICATE_REQUIRED" in str(e.reason):
                return ("TLS with %s failed: it asks for a client certificate "
                        "(use --cert and --key)" % where)
            return "TLS with %s failed: %s" % (where, e.reason or e)
        if isinstance(e, ConnectionRefusedError):
            return "no broker at %s (connection refused)" % self.address
        if isinstance(e, TimeoutError) or e.args == ("no CONNACK",):
            return "%s did not answer in time" % where
        if isinstance(e, (ConnectionError, EOFError)) or e.args in (("connection lost",),
                                                                    ("connection closed",)):
            hint = ("a TLS listener? use --ca or --tls" if not self.uses_tls else
                    "does it ask for a client certificate? use --cert and --key"
                    if not self.cert else "is the client certificate signed by its CA?")
            return "%s closed the connection before accepting it (%s)" % (where, hint)
        if isinstance(e, OSError):
            return "cannot reach %s: %s" % (where, e.strerror or e)
        return "connecting to %s failed: %s: %s" % (where, type(e).__name__, e)


# ---- command line ------------------------------------------------------------

class _RefusePassword(argparse.Action):
    """--password on the command line is refused without repeating the value
    (anyone on the machine could read it from the process list)."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error("a password is not taken on the command line: use --password-file FILE "
                     "or the %s environment variable" % PASSWORD_ENV)


def add_arguments(p, address=True):
    """The broker options of `collect` (address=True: --host, --port) and
    `stream --mqtt HOST:PORT` (address=False)."""
    if address:
        p.add_argument("--host", default="127.0.0.1", help="broker host")
        p.add_argument("--port", type=int, default=0, help="broker port (0: 1883, 8883 with TLS)")
    p.add_argument("--mqtt-version", type=int, choices=(4, 5), default=5,
                   help="MQTT 5.0 (5) or 3.1.1 (4)")
    p.add_argument("--user", default=None, help="user name")
    p.add_argument("--password-file", default=None,
                   help="file holding the password (else $%s, if set)" % PASSWORD_ENV)
    p.add_argument("--password", nargs="?", action=_RefusePassword, help=argparse.SUPPRESS)
    p.add_argument("--tls", action="store_true", help="TLS, verified against the system's CAs")
    p.add_argument("--ca", default=None, help="CA certificate to verify the broker with (TLS)")
    p.add_argument("--cert", default=None, help="client certificate (PEM), if the broker asks")
    p.add_argument("--key", default=None, help="the client certificate's key (PEM)")


def from_args(args, host=None, port=None):
    """The Broker the parsed options describe (host, port override --host/--port)."""
    return Broker(host or args.host, args.port if port is None else port, args.mqtt_version,
                  args.user, args.password_file, args.tls, args.ca, args.cert, args.key)


def parse_address(text):
    """'host:port' or 'host' -> (host, port); port 0 when not given."""
    host, _, port = text.rpartition(":") if ":" in text else (text, "", "0")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError("expected HOST or HOST:PORT, got %r" % text)
    return host, int(port)
