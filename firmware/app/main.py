# Runs at boot (MicroPython runs /main.py after boot.py): the telemetry
# firmware with /config.json and the board profile in /board.py.
import telemetry

telemetry.main()
