# Publishing over TLS, the broker's certificate verified against a CA. The CA
# file is DER: MicroPython's ssl takes the certificate as bytes (`cadata`),
# and CPython's does too. Make one from a PEM file with
#   openssl x509 -in ca.crt -outform der -out ca.der
#
#   .venv/bin/python examples/tls_publisher.py [HOST [PORT [CA.der]]]
#   MICROPYPATH=firmware:.frozen .venv/bin/micropython examples/tls_publisher.py ...
# On a board, set the clock first (ntptime.settime()): certificates have dates.
import sys
import ssl

from frugalmqtt.client import MQTTClient

BROKER = sys.argv[1] if len(sys.argv) > 1 else "broker.local"
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 8883
CA_FILE = sys.argv[3] if len(sys.argv) > 3 else "ca.der"


def tls_context(ca_file):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.verify_mode = ssl.CERT_REQUIRED  # verify the broker's certificate and name
    with open(ca_file, "rb") as f:
        ctx.load_verify_locations(cadata=f.read())
    return ctx


def main():
    # The name the certificate must carry is BROKER (sent as SNI too)
    c = MQTTClient("example-tls", BROKER, port=PORT, ssl=tls_context(CA_FILE))
    c.connect()
    print("connected over TLS")
    c.publish(b"examples/tls/hello", b"over TLS", qos=1)
    c.flush(5000)
    c.disconnect()
    print("done")


main()
