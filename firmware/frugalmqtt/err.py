# The two exceptions every profile raises, under the name applications import
# them by; they live in the core (a module of their own cost a device more
# heap than the two classes).
from .lite import MQTTError, ServerError  # noqa: F401
