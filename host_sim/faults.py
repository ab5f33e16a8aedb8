"""Link fault schedules: the cut-point sweep (every packet boundary of a
QoS 1/2 publish exchange in both directions, and a byte in the middle of each
packet) and seeded random schedules for the soak and fleet runs. A schedule
is a list of link.Rule plus link options; the same seed gives the same
schedule."""
import random

from .link import Rule

# The publish exchange of one message, as the device's link sees it.
EXCHANGE = {
    1: [("c2s", "PUBLISH"), ("s2c", "PUBACK")],
    2: [("c2s", "PUBLISH"), ("s2c", "PUBREC"), ("c2s", "PUBREL"), ("s2c", "PUBCOMP")],
}
# drop: the boundary before the packet; after: the boundary after it; mid: a
# byte inside it
CUT_ACTIONS = ("drop", "after", "mid")


def sweep_points(qos, nth=3):
    """[(label, [Rule])]: one cut per packet of the exchange of the nth
    message and action, plus a cut right after the CONNACK of the first
    reconnect (resend interrupted again)."""
    out = []
    for d, t in EXCHANGE[qos]:
        for action in CUT_ACTIONS:
            out.append(("%s-%s-%s" % (t, d, action), [Rule(d, t, nth, action)]))
    out.append(("PUBLISH-c2s-drop-then-CONNACK-s2c-after",
                [Rule("c2s", "PUBLISH", nth, "drop"), Rule("s2c", "CONNACK", 2, "after")]))
    return out


class Profile:
    """A named random fault profile (from a scenario's [faults.NAME] table)."""

    def __init__(self, name, cuts=0, actions=CUT_ACTIONS, blackhole=0.0, refuse_s=0.0,
                 delay_ms=0, jitter_ms=0, rate_bps=0, keepalive=None):
        self.name = name
        self.cuts = cuts
        self.actions = tuple(actions)
        self.blackhole = blackhole  # probability that a cut is a black hole instead
        self.refuse_s = refuse_s    # after a cut, refuse reconnects up to this long
        self.delay_ms = delay_ms
        self.jitter_ms = jitter_ms
        self.rate_bps = rate_bps
        self.keepalive = keepalive  # device keep-alive to use under this profile

    def schedule(self, rng, qos, n):
        """(rules, link options) for one link carrying n messages at qos."""
        rules = []
        points = EXCHANGE[max(qos, 1)] + [("s2c", "CONNACK")]
        for _ in range(self.cuts):
            d, t = rng.choice(points)
            nth = rng.randint(2, self.cuts + 2) if t == "CONNACK" else rng.randint(1, max(n, 1))
            action = "blackhole" if rng.random() < self.blackhole else rng.choice(self.actions)
            refuse = round(rng.uniform(0, self.refuse_s), 2) if self.refuse_s else 0.0
            rules.append(Rule(d, t, nth, action, refuse_s=refuse))
        opts = {"delay_ms": self.delay_ms, "jitter_ms": self.jitter_ms,
                "rate_bps": self.rate_bps, "seed": rng.randint(0, 1 << 30)}
        return rules, opts

    def as_dict(self):
        return dict(vars(self), actions=list(self.actions))


NONE = Profile("none")


def rng_for(seed, *parts):
    """A Random seeded from the run seed and a device's identity (stable)."""
    return random.Random("%s/%s" % (seed, "/".join(str(p) for p in parts)))
