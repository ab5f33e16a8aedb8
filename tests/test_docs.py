"""The docs site: `make docs` builds it strictly (a broken link or reference
fails), the API reference names every public member of the classes it
documents with their real signatures, the reason-code table matches the codec,
and the profile figures are those of the latest `make compare`."""
import ast
import importlib
import inspect
import re
import shutil
import subprocess
import sys
from collections import namedtuple

import pytest

from docsnippets import REPO

DOCS = REPO / "docs"
API = (DOCS / "api.md").read_text(encoding="utf-8")

sys.path.insert(0, str(REPO / "tools"))
import profiles  # noqa: E402

# The device modules of the install profiles whose modules are all in this
# tree: the reference is checked against those (a profile awaiting a module
# being written elsewhere is checked once it lands).
READY = {"frugalmqtt." + m for p in profiles.ready() for m in profiles.PROFILES[p]}


# ---- the build ----------------------------------------------------------------------

def make_docs(src, out):
    return subprocess.run(["make", "-s", "docs", "DOCS_SRC=%s" % src, "DOCS_OUT=%s" % out],
                          cwd=str(REPO), capture_output=True, text=True, timeout=300)


def test_make_docs_builds_every_page(tmp_path):
    r = make_docs(DOCS, tmp_path / "site")
    assert r.returncode == 0, r.stdout + r.stderr
    for page in DOCS.glob("*.md"):
        assert (tmp_path / "site" / (page.stem + ".html")).is_file(), page.name


BROKEN = {  # what a page may get wrong -> what the build must report
    "[a page that is not there](nowhere.md)": "nowhere.md",
    "[a heading that is not there](api.md#no-such-heading)": "no-such-heading",
    "{py:meth}`frugalmqtt.client.MQTTClient.no_such_method`": "no_such_method",
}


def test_make_docs_fails_on_broken_references(tmp_path):
    src = tmp_path / "docs"
    shutil.copytree(DOCS, src)
    (tmp_path / "examples").symlink_to(REPO / "examples")  # literalinclude ../examples/
    page = src / "troubleshooting.md"
    page.write_text(page.read_text() + "\n" + "\n\n".join(BROKEN) + "\n")
    r = make_docs(src, tmp_path / "site")
    assert r.returncode != 0, r.stdout + r.stderr
    for broken, reported in BROKEN.items():
        assert any("troubleshooting.md" in l and reported in l for l in r.stderr.splitlines()), (
            broken, r.stderr)


# ---- the API reference ---------------------------------------------------------------

_DIRECTIVE = re.compile(r"^(`{3,})\{py:(\w+)\}\s*(.*)$")



# Keyword arguments a facade passes on to client.MQTTClient (`**sizes`).
SIZING = ["max_packet", "tx_size", "slots", "slot_size", "inbound", "aliases_out", "aliases_in",
          "alias_topic_max"]


Entry = namedtuple("Entry", "kind module cls name args text")


def documented():
    """An Entry for every py: directive of docs/api.md: the class it is in
    (or None), its signature's text (None without one) and, for a class, its
    body's text."""
    lines = API.splitlines()
    out = []
    stack = []  # [fence, Entry fields, first body line] of the open classes
    for i, line in enumerate(lines):
        if stack and line.strip() == stack[-1][0]:
            fence, fields, first = stack.pop()
            fields[5] = "\n".join(lines[first:i])
            continue
        m = _DIRECTIVE.match(line)
        if not m:
            continue
        fence, kind, sig = m.groups()
        module = None
        for opt in lines[i + 1:i + 4]:
            if opt.startswith(":module:"):
                module = opt.split(None, 1)[1].strip()
        name, _, args = sig.partition("(")
        cls = stack[-1][1] if stack else None
        fields = [kind, module or (cls[1] if cls else None), cls[3] if cls else None,
                  name.strip(), args[:-1] if args else None, ""]
        out.append(fields)
        if kind in ("class", "exception"):
            stack.append([fence, fields, i + 1])
    assert not stack, "unclosed directive in api.md"
    return [Entry(*f) for f in out if f[1] in READY]


ENTRIES = documented()
CLASSES = [e for e in ENTRIES if e.kind in ("class", "exception")]


def entry_id(e):
    return ".".join(x for x in (e.module, e.cls, e.name) if x)


def real(module, cls, name):
    obj = importlib.import_module(module)
    for part in ([cls] if cls else []) + [name]:
        obj = getattr(obj, part)
    return obj


def doc_params(args):
    """[(name, default)] of a documented signature; default is a value, a
    name (str) for a default that is a function, or inspect.Parameter.empty."""
    fn = ast.parse("def f(%s): pass" % args).body[0].args
    pos = fn.args
    defaults = [inspect.Parameter.empty] * (len(pos) - len(fn.defaults)) + fn.defaults
    out = []
    for a, d in zip(pos, defaults):
        if d is not inspect.Parameter.empty:
            d = d.id if isinstance(d, ast.Name) else ast.literal_eval(d)
        out.append((a.arg, d))
    return out


def passed_on(fn):
    """For a function whose parameters are (self, *args, **kw) and that hands
    both on to one call, as lite.core.__init__ does (`lhello.encode(self,
    *args, **t)`): (the function called, the names of its parameters that the
    caller supplies itself: those before *args and the explicit keywords),
    read from the caller's source. None for any other function."""
    import textwrap
    sig = list(inspect.signature(fn).parameters.values())
    if [p.kind for p in sig[-2:]] != [inspect.Parameter.VAR_POSITIONAL,
                                      inspect.Parameter.VAR_KEYWORD]:
        return None
    star, kw = sig[-2].name, sig[-1].name
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    local = {}  # `from . import m` / `import m` inside the function
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            package = fn.__module__.rpartition(".")[0] if node.level else None
            for a in node.names:
                base = "." * node.level + (node.module + "." if node.module else "")
                local[a.asname or a.name] = (base + a.name, package)
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call)
             and any(isinstance(a, ast.Starred) and isinstance(a.value, ast.Name)
                     and a.value.id == star for a in c.args)
             and any(k.arg is None and isinstance(k.value, ast.Name) and k.value.id == kw
                     for k in c.keywords)]
    if len(calls) != 1:
        return None
    call = calls[0]
    f = call.func
    assert isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name), ast.dump(f)
    name, package = local[f.value.id]
    callee = getattr(importlib.import_module(name, package), f.attr)
    lead = [isinstance(a, ast.Starred) for a in call.args].index(True)  # args before *args
    given = list(inspect.signature(callee).parameters)[:lead]
    given += [k.arg for k in call.keywords if k.arg]
    return callee, given


def real_params(obj, bases=()):
    """[(name, default)] of obj's signature: `self` dropped, a (*args, **kw)
    pass-through replaced by the parameters of the function it hands them to
    (less those the caller supplies itself) or else by the base class's,
    **sizes by the client's sizing."""
    params = [p for p in inspect.signature(obj).parameters.values() if p.name != "self"]
    kinds = [p.kind for p in params]
    if kinds == [inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD]:
        fn = obj.__init__ if inspect.isclass(obj) else obj
        through = passed_on(fn) if inspect.isfunction(fn) else None
        if through:
            callee, given = through
            return [p for p in real_params(callee) if p[0] not in given]
        return real_params(bases[0], bases[1:])
    out = []
    client = inspect.signature(real("frugalmqtt.client", None, "MQTTClient")).parameters
    for p in params:
        if p.kind == inspect.Parameter.VAR_KEYWORD:
            out += [(n, client[n].default) for n in SIZING]
        else:
            d = p.default
            out.append((p.name, d.__name__ if inspect.isroutine(d) else d))
    return out


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.args is not None], ids=entry_id)
def test_documented_signature_is_the_real_one(entry):
    obj = real(entry.module, entry.cls, entry.name)
    bases = inspect.getmro(obj)[1:] if inspect.isclass(obj) else ()
    assert doc_params(entry.args) == real_params(obj, bases)


@pytest.mark.parametrize("entry", CLASSES, ids=entry_id)
def test_documented_members_exist(entry, tmp_path):
    cls = real(entry.module, None, entry.name)
    objs = [cls] + [o for o in instances(tmp_path)[entry.name] if type(o) is cls]
    for e in ENTRIES:
        if e.cls == entry.name and e.module == entry.module:
            assert any(hasattr(o, e.name) for o in objs), (
                "%s is documented but does not exist" % entry_id(e))


def instances(tmp_path):
    """One instance of each documented class of a ready module, for its
    instance attributes."""
    from frugalmqtt.client import MQTTClient
    from frugalmqtt.lite import Publisher, core
    from frugalmqtt import session, props, recv, err
    out = {
        "core": [core("doc", "localhost")],
        "MQTTClient": [MQTTClient("doc", "localhost")],
        "Publisher": [Publisher("doc", "localhost")],
        "Message": [recv.Message(props.Props())],
        "Props": [props.Props()],
        "Session": [session.Session("doc")],
        "MQTTError": [err.MQTTError(0x81)],
        "ServerError": [err.ServerError(0x87)],
    }
    if "frugalmqtt.simple" in READY:
        from frugalmqtt import simple
        out["MQTTClient"].append(simple.MQTTClient("doc", "localhost"))
        out["MQTTException"] = [simple.MQTTException(5)]
    if "frugalmqtt.robust" in READY:
        from frugalmqtt import robust
        out["MQTTClient"].append(robust.MQTTClient("doc", "localhost"))
    if "frugalmqtt.telem" in READY:
        from frugalmqtt.telem import Telemetry
        out["Telemetry"] = [Telemetry("doc", "localhost")]
    if "frugalmqtt.aclient" in READY:
        from frugalmqtt.aclient import AMQTTClient
        out["AMQTTClient"] = [AMQTTClient("doc", "localhost")]
    if "frugalmqtt.outbox" in READY:
        from frugalmqtt import outbox
        box = outbox.Outbox(str(tmp_path / "outbox.bin"), 16384)
        MQTTClient("doc", "localhost", outbox=box)  # attached: the outbox's full state
        out["Outbox"] = [box]
    return out


def mentioned(name, text):
    return ("`%s`" % name in text or "`%s(" % name in text or "} %s(" % name in text
            or re.search(r"\} %s$" % re.escape(name), text, re.M))


@pytest.mark.parametrize("entry", CLASSES, ids=entry_id)
def test_every_public_member_is_in_the_reference(entry, tmp_path):
    module, name, text = entry.module, entry.name, entry.text
    cls = real(module, None, name)
    inherited = set(dir(BaseException)) if issubclass(cls, BaseException) else set(dir(object))
    names = {n for n in dir(cls) if not n.startswith("_") and n not in inherited}
    for obj in instances(tmp_path)[name]:
        if type(obj) is cls:
            names |= {n for n in vars(obj) if not n.startswith("_")}
    missing = sorted(n for n in names if not mentioned(n, text))
    assert not missing, "%s.%s: not in docs/api.md: %s" % (module, name, missing)


# Modules whose every public class and function is in the reference (those
# of a ready profile), and the ones whose integer constants are theirs (the
# others import theirs). session.ticks_ms/ticks_diff and client.sleep_ms are
# CPython stand-ins for MicroPython's time functions; FULL is the core's
# publish() result, which the drivers wait out (lite) or name WINDOW_FULL.
MODULES = [m for m in ["frugalmqtt.client", "frugalmqtt.aclient", "frugalmqtt.lite",
                       "frugalmqtt.liteprops", "frugalmqtt.simple", "frugalmqtt.outbox",
                       "frugalmqtt.telem", "frugalmqtt.err", "frugalmqtt.session",
                       "frugalmqtt.recv", "frugalmqtt.props"] if m in READY]
CONSTANTS_OF = {"frugalmqtt.lite", "frugalmqtt.session", "frugalmqtt.client"}
NOT_API = {"frugalmqtt.session": {"ticks_ms", "ticks_diff", "FULL"},
           "frugalmqtt.client": {"sleep_ms", "FULL"},
           "frugalmqtt.lite": {"FULL", "ticks_ms", "ticks_diff"},
           "frugalmqtt.recv": {"Receiver"}}  # the mixin: documented with its clients


@pytest.mark.parametrize("module", MODULES)
def test_every_public_name_of_the_module_is_documented(module):
    mod = importlib.import_module(module)
    names = set()
    for n, obj in vars(mod).items():
        if n.startswith("_") or n in NOT_API.get(module, ()):
            continue
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and obj.__module__ == module:
            names.add(n)
        elif type(obj) is int and n.isupper() and module in CONSTANTS_OF:
            names.add(n)
    have = {e.name for e in ENTRIES if e.module == module and e.cls is None}
    assert names - have == set(), "%s: undocumented %s" % (module, sorted(names - have))


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.kind == "data"], ids=entry_id)
def test_documented_constant_has_its_value(entry):
    module, name = entry.module, entry.name
    body = API[API.index("{py:data} %s\n:module: %s" % (name, module)):]
    value = re.search(r"`(-?\d+)`", body).group(1)
    assert real(module, None, name) == int(value)


# ---- reason codes --------------------------------------------------------------------

def reason_table():
    """{packet name: set of codes} from the MQTT 5.0 table of reason-codes.md."""
    text = (DOCS / "reason-codes.md").read_text(encoding="utf-8")
    table = text[text.index("## MQTT 5.0"):text.index("The ones a telemetry")]
    by_packet = {}
    for code, packets in re.findall(r"^\| `0x([0-9A-F]{2})` \| [^|]+ \| ([^|]+) \|$", table, re.M):
        for p in re.findall(r"[A-Z]+", packets):
            by_packet.setdefault(p, set()).add(int(code, 16))
    return by_packet


def test_reason_code_table_matches_the_codec():
    from frugalmqtt_host.ref import control, publish
    codec = {
        "CONNACK": control._CONNACK_V5, "SUBACK": control._SUBACK_V5,
        "UNSUBACK": control._UNSUBACK_V5, "DISCONNECT": control._DISCONNECT_V5,
        "AUTH": control._AUTH_V5, "PUBACK": publish._PUB_REASONS,
        "PUBREC": publish._PUB_REASONS, "PUBREL": publish._REL_REASONS,
        "PUBCOMP": publish._REL_REASONS,
    }
    table = reason_table()
    assert set(table) == set(codec)
    for packet, codes in codec.items():
        assert table[packet] == set(codes), packet


def test_311_connack_codes_are_the_codecs():
    from frugalmqtt_host.ref import control
    text = (DOCS / "reason-codes.md").read_text(encoding="utf-8")
    part = text[text.index("## MQTT 3.1.1"):text.index("SUBACK return codes")]
    assert {int(c) for c in re.findall(r"^\| `(\d)` \|", part, re.M)} == set(control._CONNACK_V4)


# ---- profile figures -----------------------------------------------------------------

def test_profile_ram_is_the_latest_make_compare():
    latest = sorted((REPO / "bench" / "results").glob("compare-*.md"))[-1]
    compare = latest.read_text(encoding="utf-8")
    profiles = (DOCS / "profiles.md").read_text(encoding="utf-8")
    assert latest.name in profiles
    rows = ["heap held after import", "heap held after connect",
            "smallest heap, connect + 1000 QoS 1 publishes",
            "heap held after import, bytecode in ROMFS", "smallest heap, bytecode in ROMFS"]
    for row in rows:
        cells = re.search(r"^\| %s \| ([^|]+) \| ([^|]+) \|" % re.escape(row), compare, re.M)
        full, lite = cells.group(1).strip(), cells.group(2).strip()
        assert "| %s | %s | %s |" % (row, full, lite) in profiles, row


def test_sizing_costs_are_the_latest_results():
    latest = sorted((REPO / "bench" / "results").glob("sizing-*.md"))[-1]
    results = latest.read_text(encoding="utf-8")
    profiles = (DOCS / "profiles.md").read_text(encoding="utf-8")
    assert latest.name in profiles
    for cls, total in re.findall(r"^\| (\w+) \| \(every default\) \| \| (\d+) B in all", results,
                                 re.M):
        assert "%s B" % total in profiles, (cls, total)


def test_profile_mpy_sizes_are_this_trees(tmp_path):
    """The .mpy column of the profile table is what `make size` says now."""
    import mpy
    for src, rel in mpy.sources():  # the package, one architecture (bytecode: same on both)
        if rel.startswith("frugalmqtt/"):
            mpy.compile_one(src, tmp_path / "armv6m" / rel, "armv6m")
    mods = mpy.sizes(tmp_path)
    text = (DOCS / "profiles.md").read_text(encoding="utf-8")
    for name in profiles.PROFILES:
        row = re.search(r"^\| `%s` \|.*\| ([^|]+) \|$" % name, text, re.M)
        assert row, name
        size = (str(mpy.profile_size(name, mods)) if profiles.available(name)
                else profiles.awaiting(name))
        assert row.group(1).strip() == size, name


# ---- the settings read from the core --------------------------------------------------

def settings_table():
    """[(names, where, full_only)] of the table in api.md's "Settings read
    from the core": the attributes of a row and its `state` cell."""
    part = API[API.index("## Settings read from the core"):API.index("They are read-only.")]
    rows = []
    full = False
    for line in part.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if not line.startswith("| `") and not line.startswith("| full"):
            continue
        full = full or cells[0].startswith("full and asyncio clients")
        rows.append((re.findall(r"`(\w+)`", cells[0]), cells[2], full))
    return rows


CONVERT = {"retain_ok": lambda v: v == 1, "up": lambda v: v != 0, "ob": lambda v: v or None}


def test_settings_table_is_where_the_core_keeps_them():
    from frugalmqtt.lite import Publisher
    from frugalmqtt.client import MQTTClient
    from frugalmqtt.aclient import AMQTTClient
    rows = settings_table()
    assert {n for r in rows for n in r[0]} >= {"server", "port", "keepalive", "ssl", "clean",
                                                "v", "timeout", "slots", "quota", "sp",
                                                "connected", "up", "n", "ob", "early"}
    for names, where, full in rows:
        for cls in (MQTTClient, AMQTTClient) if full else (Publisher, MQTTClient, AMQTTClient):
            c = cls("doc", "localhost")
            for name in names:
                assert name not in vars(c), (cls, name)  # read from state, not held
            idx = [int(k) for k in re.findall(r"`\[(\d+)\]`", where)]
            if names == ["keepalive"]:
                c.state[27][13:15] = (300).to_bytes(2, "big")
                assert c.keepalive == 300
            elif names == ["slots"]:
                assert c.slots == len(c.state[26])
            elif names == ["connected"]:
                assert c.connected is False and c.sock is None
                c.sock = object()
                assert c.connected is True
            else:
                assert len(idx) == len(names), names
                for name, k in zip(names, idx):
                    for val in (0, 1, 7):
                        c.state[k] = val
                        assert getattr(c, name) == CONVERT.get(name, lambda v: v)(val), (
                            cls, name, k, val)
                    # read-only: an assignment hides the value and changes nothing
                    c.state[k] = 1
                    setattr(c, name, 5)
                    assert c.state[k] == 1, (cls, name)


def test_quota_reads_0_while_not_connected():
    from frugalmqtt.lite import Publisher
    assert Publisher("doc", "localhost", slots=4).quota == 0
