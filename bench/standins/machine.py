# Stand-in for `machine` on the unix port, for clients written for boards
# (mqtt_as calls machine.unique_id() at import): the unix port's own machine
# module plus unique_id(). Found before the built-in one on MICROPYPATH.
from umachine import *  # noqa: F401,F403


def unique_id():
    return b"unix01"
