# Freezes frugalmqtt into a custom MicroPython firmware: the modules of one
# install profile of tools/profiles.py (the same lists `make size`, mip and
# tools/deploy.py use), and the telemetry firmware's modules. Included by
# boards/<board>/manifest.py as
#     include("../common/manifest.py", profile="telemetry", app=True)
# Paths are relative to this file (the manifest tool runs it from here).
import os

options.defaults(profile="telemetry", app=True)
_profiles = {"__name__": "profiles", "__file__": os.path.abspath("../../tools/profiles.py")}
with open(_profiles["__file__"]) as _f:
    exec(_f.read(), _profiles)

if not _profiles["available"](options.profile):
    raise ValueError("profile %s: %s" % (options.profile, _profiles["awaiting"](options.profile)))
package("frugalmqtt", files=[m + ".py" for m in _profiles["PROFILES"][options.profile]],
        base_path="../../firmware")
if options.app:
    for _m in _profiles["APP"]:
        module(_m + ".py", base_path="../../firmware/app")
