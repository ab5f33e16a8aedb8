# MQTT 5 request/response: a requester sends a question with a Response Topic
# and Correlation Data; a service answers on that topic with the same
# Correlation Data, so the requester can match answers to questions. Both
# clients run in this one program, polled in turn.
#
#   .venv/bin/python examples/request_response.py [HOST [PORT]]
#   MICROPYPATH=firmware:.frozen .venv/bin/micropython examples/request_response.py [HOST [PORT]]
import sys

from frugalmqtt.client import MQTTClient
from frugalmqtt import props as P

BROKER = sys.argv[1] if len(sys.argv) > 1 else "broker.local"
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 1883
REQUESTS = b"examples/rpc/requests"
REPLIES = b"examples/rpc/replies/example-requester"

service = MQTTClient("example-service", BROKER, port=PORT, version=5)
requester = MQTTClient("example-requester", BROKER, port=PORT, version=5)
answers = {}


def serve(msg):
    # msg.props is valid during the call only: read what the reply needs now
    reply_to = msg.props.get_bytes(P.RESPONSE_TOPIC)
    corr = msg.props.get_bytes(P.CORRELATION_DATA)
    if reply_to is None:
        return  # not a request
    answer = bytes(msg.payload).upper()
    service.publish(reply_to, answer, qos=1, props=[(P.CORRELATION_DATA, corr)])


def on_reply(msg):
    answers[msg.props.get_bytes(P.CORRELATION_DATA)] = bytes(msg.payload)


def main():
    service.on_message = serve
    requester.on_message = on_reply
    service.connect()
    service.subscribe(REQUESTS, qos=1)
    requester.connect()
    requester.subscribe(REPLIES, qos=1)
    questions = ((b"q1", b"hello"), (b"q2", b"mqtt 5"))
    for corr, question in questions:
        requester.publish(REQUESTS, question, qos=1,
                          props=[(P.RESPONSE_TOPIC, REPLIES), (P.CORRELATION_DATA, corr)])
    for _ in range(100):  # at most 10 s
        if len(answers) == len(questions):
            break
        service.poll(50)
        requester.poll(50)
    for corr, question in questions:
        print("%s: %s -> %s" % (corr.decode(), question.decode(), answers[corr].decode()))
    service.disconnect()
    requester.disconnect()


main()
