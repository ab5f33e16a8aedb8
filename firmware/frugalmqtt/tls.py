# frugalmqtt.tls: ssl=True or ssl={...} (umqtt's ssl_params) made into an
# SSLContext that verifies the server. A client imports this only when given
# one of those, so a device without TLS (or with its own SSLContext) pays
# nothing for it.
#
# The dict's keys, as ssl.wrap_socket/umqtt's ssl_params name them:
#   cadata   the CA certificate(s): DER bytes, or PEM (converted to DER here
#            on MicroPython, whose mbedTLS takes DER only)
#   cafile   (or ca_certs) a file holding them
#   certfile, keyfile   a client certificate and its key (files)
#   cert_reqs ssl.CERT_REQUIRED (the default); ssl.CERT_NONE, given
#            explicitly, encrypts without verifying anything
import ssl
from sys import implementation

_NEED = ("ssl=True needs the CA to verify the server: pass ssl_params={'cadata': "
         "the CA certificate (DER or PEM bytes)} or {'cafile': path} (simple), or "
         "ssl={'cadata': ...} or an SSLContext (other clients); "
         "{'cert_reqs': ssl.CERT_NONE} only to skip verification")


def der(ca):
    """The certificates in ca (bytes or str) as a list of DER blobs: PEM
    blocks decoded, DER passed through."""
    if type(ca) is str:
        ca = ca.encode()
    if b"-----BEGIN" not in ca:
        return [ca]
    from binascii import a2b_base64
    out = []
    for block in ca.split(b"-----BEGIN CERTIFICATE-----")[1:]:
        out.append(a2b_base64(block.split(b"-----END")[0]))
    if not out:
        raise ValueError("cadata: PEM without a CERTIFICATE block "
                         "(convert it: openssl x509 -in ca.crt -outform der -out ca.der)")
    return out


def context(params):
    """An SSLContext for a client from params (a dict; True or {} raise
    ValueError saying what to pass)."""
    p = params if type(params) is dict else {}
    req = p.get("cert_reqs", ssl.CERT_REQUIRED)
    ca = p.get("cadata")
    f = p.get("cafile") or p.get("ca_certs")
    if f:
        with open(f, "rb") as fh:
            ca = fh.read()
    if not ca and req != ssl.CERT_NONE:
        raise ValueError(_NEED)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if implementation.name != "micropython":
        ctx.check_hostname = req == ssl.CERT_REQUIRED  # before CERT_NONE (CPython's rule)
    ctx.verify_mode = req
    if ca:
        for c in der(ca):
            ctx.load_verify_locations(cadata=c)
    if p.get("certfile"):
        ctx.load_cert_chain(p["certfile"], p.get("keyfile"))
    return ctx
