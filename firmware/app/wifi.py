# Join a Wi-Fi network as a station, with a timeout per attempt and a bounded
# number of attempts. `network` is the port's module (ESP32, Pico W) or the
# stand-in in boards/unix/ on the unix port.
from time import ticks_ms, ticks_diff, sleep_ms


def connect(cfg, log=print):
    """cfg: {"ssid", "password", "timeout_ms": 15000, "retries": 3,
    "backoff_ms": 2000, "hostname": optional}. Returns the WLAN interface;
    raises OSError when every attempt timed out or failed."""
    import network
    wlan = network.WLAN(network.STA_IF)
    wlan.active(True)
    if cfg.get("hostname"):
        try:
            network.hostname(cfg["hostname"])
        except (AttributeError, ValueError, OSError):
            pass  # a port without hostname(): keep its default
    if wlan.isconnected():
        return wlan
    timeout = cfg.get("timeout_ms", 15000)
    tries = cfg.get("retries", 3)
    backoff = cfg.get("backoff_ms", 2000)
    ssid = cfg["ssid"]
    attempt = 0
    while attempt < tries:
        attempt += 1
        wlan.connect(ssid, cfg.get("password") or "")
        t0 = ticks_ms()
        while not wlan.isconnected() and ticks_diff(ticks_ms(), t0) < timeout:
            sleep_ms(100)
        if wlan.isconnected():
            log("wifi: joined %s as %s (attempt %d)" % (ssid, wlan.ifconfig()[0], attempt))
            return wlan
        log("wifi: attempt %d/%d to join %s failed (status %s)" % (
            attempt, tries, ssid, wlan.status()))
        wlan.disconnect()
        if attempt < tries:
            sleep_ms(backoff * attempt)
    raise OSError("wifi: could not join " + ssid)
