# frugalmqtt.robust: micropython-lib's umqtt.robust over the facade
# (frugalmqtt.simple): an umqtt.robust program switches by its import line
#     from umqtt.robust import MQTTClient   ->   from frugalmqtt.robust import MQTTClient
# publish(), subscribe(), wait_msg() and check_msg() retry after an OSError
# (a lost link): log() it, reconnect() (connect(False), every DELAY seconds
# until the server answers) and try again. The session is kept
# (clean_session=False), so the server keeps the subscriptions, as with
# umqtt.robust. What the facade adds stays: QoS 2, keep-alive.
from time import sleep

from . import simple


class MQTTClient(simple.MQTTClient):
    DELAY = 2  # seconds between reconnect attempts
    DEBUG = False  # log() prints the errors

    def delay(self, i):
        """Wait before reconnect attempt i + 1 (override for a backoff)."""
        sleep(self.DELAY)

    def log(self, in_reconnect, e):
        if self.DEBUG:
            if in_reconnect:
                print("mqtt reconnect: %r" % e)
            else:
                print("mqtt: %r" % e)

    def reconnect(self):
        """connect(False) until it succeeds (an override of connect() runs,
        e.g. one that subscribes again); returns its session present."""
        i = 0
        while True:
            try:
                return self.connect(False)
            except OSError as e:
                self.log(True, e)
                i += 1
                self.delay(i)

    def _retry(self, fn, *args):
        while True:
            try:
                return fn(self, *args)
            except OSError as e:
                self.log(False, e)
            self.reconnect()

    def publish(self, topic, msg, retain=False, qos=0):
        return self._retry(simple.MQTTClient.publish, topic, msg, retain, qos)

    def subscribe(self, topic, qos=0):
        return self._retry(simple.MQTTClient.subscribe, topic, qos)

    def wait_msg(self):
        return self._retry(simple.MQTTClient.wait_msg)

    def check_msg(self, attempts=2):
        """check_msg(), reconnecting after an OSError up to `attempts` times;
        None when they all failed."""
        while attempts:
            try:
                return simple.MQTTClient.check_msg(self)
            except OSError as e:
                self.log(False, e)
            self.reconnect()
            attempts -= 1
