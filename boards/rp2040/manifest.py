# Custom Pico W firmware with frugalmqtt and the telemetry firmware frozen in
# (bytecode in flash: nothing of it is loaded into the GC heap). From a
# MicroPython checkout (pico-sdk submodules fetched):
#     make -C ports/rp2 BOARD=RPI_PICO_W \
#         FROZEN_MANIFEST=/path/to/frugalmqtt/boards/rp2040/manifest.py
# Then copy config.json and main.py to the board (tools/deploy.py --frozen).
include("$(BOARD_DIR)/manifest.py")  # RPI_PICO_W's own: port modules + networking
include("../common/manifest.py", profile="telemetry", app=True)
module("board.py")
