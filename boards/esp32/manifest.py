# Custom ESP32 firmware with frugalmqtt and the telemetry firmware frozen in
# (bytecode in flash: nothing of it is loaded into the GC heap). From a
# MicroPython checkout (ESP-IDF set up):
#     make -C ports/esp32 BOARD=ESP32_GENERIC \
#         FROZEN_MANIFEST=/path/to/frugalmqtt/boards/esp32/manifest.py
# Then copy config.json and main.py to the board (tools/deploy.py --frozen).
include("$(PORT_DIR)/boards/manifest.py")  # the port's own frozen modules
include("../common/manifest.py", profile="telemetry", app=True)
module("board.py")
