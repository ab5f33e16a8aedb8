"""The device package's imports, read statically: nothing a device runs
(firmware/, boards/) imports host code, and the modules of firmware/frugalmqtt/
import each other without a circle, counting the imports inside functions
(lazy imports) too. And the host package's copies of device constants."""
import ast
import importlib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIRMWARE = REPO / "firmware"
PACKAGE = FIRMWARE / "frugalmqtt"
HOST_SIDE = ("frugalmqtt_host", "host_sim", "tests", "pipeline", "bench", "tools")


def imports(path, package="frugalmqtt"):
    """(absolute module names, sibling modules of `package`) that the source at
    path imports anywhere in it: top level, try/except, function bodies."""
    absolute, siblings = set(), set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                absolute.add(a.name)
                if a.name.startswith(package + "."):
                    siblings.add(a.name.split(".")[1])
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # from . import x / from .x import y
                mod = node.module
            elif node.module == package:  # from frugalmqtt import x
                mod = None
            elif (node.module or "").startswith(package + "."):
                mod = node.module[len(package) + 1:]
            else:
                absolute.add(node.module)
                continue
            if mod:
                siblings.add(mod.split(".")[0])
            else:
                siblings.update(a.name for a in node.names)
    return absolute, siblings


def graph(package_dir):
    """{module: modules of the package it imports} for a package directory."""
    names = {p.stem for p in package_dir.glob("*.py")}
    return {p.stem: imports(p)[1] & names - {p.stem} for p in package_dir.glob("*.py")}


def cycle(g):
    """One import circle in graph g as a list of modules, or None."""
    state = {}  # module -> 1 on the current path, 2 done
    path = []

    def visit(m):
        state[m] = 1
        path.append(m)
        for n in sorted(g.get(m, ())):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(g):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_firmware_imports_nothing_host_side():
    sources = sorted(FIRMWARE.rglob("*.py")) + sorted((REPO / "boards").rglob("*.py"))
    assert len(sources) > 15
    bad = []
    for p in sources:
        for name in imports(p)[0]:
            if name.split(".")[0] in HOST_SIDE:
                bad.append("%s imports %s" % (p.relative_to(REPO), name))
    assert not bad, bad


def test_device_package_has_no_import_circle():
    g = graph(PACKAGE)
    assert {"recv", "alias", "lite"} <= g["client"]  # the graph is read
    assert {"lite", "propview"} <= g["recv"] and g["lite"] <= {"time", "why", "lhello", "lconn"}
    assert cycle(g) is None, "import circle: " + " -> ".join(cycle(g))


def test_circle_finder_sees_lazy_and_indirect_circles(tmp_path):
    # What the device package had: control imported server inside decode()
    # and server imported control at the top.
    (tmp_path / "control.py").write_text("from .codec import x\n\ndef decode():\n"
                                         "    from . import server\n")
    (tmp_path / "server.py").write_text("from .control import Will\n")
    (tmp_path / "codec.py").write_text("from frugalmqtt import props\n")
    (tmp_path / "props.py").write_text("import frugalmqtt.codec\n")
    g = graph(tmp_path)
    assert g == {"control": {"codec", "server"}, "server": {"control"}, "codec": {"props"},
                 "props": {"codec"}}
    assert cycle(g) in (["codec", "props", "codec"], ["control", "server", "control"])
    assert cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_host_copies_of_private_consts_match_the_device():
    # frugalmqtt_host.codec repeats a few private const() values of the device
    # modules (MicroPython cannot import them); CPython keeps the originals.
    from frugalmqtt_host.ref import codec, props
    from frugalmqtt_host import codec as host
    for name in ("_HEAD", "_LEN", "_BODY", "_DONE"):
        assert getattr(host, name) == getattr(codec, name), name
    for name in ("_BOOL", "_U16_NZ", "_U32_NZ", "_VBI_NZ", "_STR", "_PAIR"):
        assert getattr(host, name) == getattr(props, name), name


def test_device_copies_of_the_core_consts_match():
    # The core (lite.py) keeps its numbers in state[...] and its slots in one
    # buffer; modules that read them (lconn, lhello, recv, alias, outbox,
    # wake, ...) repeat the core's private const() indices and slot states
    # (MicroPython cannot import private const names). CPython keeps them as
    # module attributes: every same-named copy must equal the core's.
    import importlib
    from frugalmqtt import lite
    names = [n for n in dir(lite) if n.startswith("_") and not n.startswith("__")
             and type(getattr(lite, n)) is int]
    assert {"_N", "_QUOTA", "_ORD", "_HEAD", "_M", "_COMP", "_HOLD"} <= set(names)
    copies = {}
    for m in sorted(p.stem for p in PACKAGE.glob("*.py")):
        if m in ("lite", "time"):
            continue
        mod = importlib.import_module("frugalmqtt." + m)
        for name in names:
            if hasattr(mod, name):
                assert getattr(mod, name) == getattr(lite, name), (m, name)
                copies[m] = copies.get(m, 0) + 1
    assert {"lconn", "lhello"} <= set(copies)  # the walk found them
    assert getattr(importlib.import_module("frugalmqtt.lconn"), "_SESSION_LOST") == \
        lite.SESSION_LOST


def test_replays_copies_of_the_outbox_record_consts_match():
    # replay.py (the outbox's reload, loaded once per attach) repeats the
    # outbox's record kinds and sizes: MicroPython cannot import private
    # const() names, CPython keeps them as module attributes.
    from frugalmqtt import outbox, replay
    names = [n for n in vars(replay) if n[:1] == "_" and n[1:2].isupper()]
    assert sorted(names) == sorted(["_PUB", "_LOAD", "_GOTREC", "_DONE", "_IN_ADD", "_IN_DEL",
                                    "_IN_CLR", "_HDR", "_C", "_MASK", "_ORD"])
    for name in names:
        assert getattr(replay, name) == getattr(outbox, name), name
