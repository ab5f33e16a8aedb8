"""Host-side helpers for the docs tests: the fenced code blocks of the README
and docs/*.md, and running a program on CPython or the MicroPython unix port
the way the docs tell a user to.

Fence info strings (docs/internals.md, "How the docs are tested"):
    ```python            a program: run on CPython and on the unix port
    ```python board      a program for a board: run on the unix port with the
                         board stand-ins of boards/unix (the `network` module)
    ```python fragment   part of a program: compiled, not run
    ```sh, ```json, ... not Python: never run
A program that talks to a broker names it on one line,
    BROKER, PORT = "broker.local", 1883
which the tests rewrite to their own mosquitto.
"""
import builtins
import os
import re
import subprocess
import sys
import symtable
from collections import namedtuple
from pathlib import Path

from hostkit import micropython_binary

REPO = Path(__file__).resolve().parent.parent
FIRMWARE = REPO / "firmware"
BOARD_STANDINS = REPO / "boards" / "unix"
DOC_FILES = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
RUNTIMES = ("cpython", "micropython")
RUN_TIMEOUT_S = 60

PYTHON_KINDS = {"": "program", "board": "board", "fragment": "fragment"}
BROKER_LINE = re.compile(r"^BROKER, PORT = .*$", re.M)
_FENCE = re.compile(r"^( *)(`{3,}|~{3,})(.*)$")

Block = namedtuple("Block", "path line info code")


def fenced_blocks(path):
    """Every fenced code block of a Markdown file, in order, with its first
    line number; MyST directives ({py:class}, {toctree}...) are looked into,
    not returned."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    blocks = []
    open_directives = []  # fences of the directives we are inside
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).strip()
        if open_directives and lines[i].strip() == open_directives[-1]:
            open_directives.pop()
            i += 1
            continue
        if info.startswith("{"):
            open_directives.append(fence)
            i += 1
            continue
        body = []
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence[0] * len(fence))
                                      and not lines[j].strip().strip(fence[0])):
            body.append(_dedent(lines[j], indent))
            j += 1
        blocks.append(Block(Path(path), i + 1, info, "\n".join(body) + "\n"))
        i = j + 1
    return blocks


def _dedent(line, indent):
    """A line of a block whose fence is indented (inside a list item)."""
    n = len(line) - len(line.lstrip(" "))
    return line[min(n, indent):]


def python_kind(block):
    """"program", "board", "fragment", or None when the block is not Python;
    ValueError for a Python block whose info string is not one of ours."""
    words = block.info.split()
    if not words or words[0] != "python":
        return None
    tag = " ".join(words[1:])
    if tag not in PYTHON_KINDS:
        raise ValueError("%s:%d: unknown fence info %r" % (block.path.name, block.line,
                                                          block.info))
    return PYTHON_KINDS[tag]


def all_blocks():
    return [b for path in DOC_FILES for b in fenced_blocks(path)]


def block_id(block):
    return "%s:%d" % (block.path.relative_to(REPO), block.line)


def undefined_names(code):
    """Names a program uses but never binds, imports or gets from builtins
    (what a paste would die of with NameError, maybe only on a rare path)."""
    top = symtable.symtable(code, "<snippet>", "exec")
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    # a function's own parameters and locals are not globals
    missing = set()

    def walk(table):
        for s in table.get_symbols():
            name = s.get_name()
            is_global = table is top or s.is_global()
            if (is_global and s.is_referenced() and name not in bound
                    and not hasattr(builtins, name)):
                missing.add(name)
        for child in table.get_children():
            walk(child)

    walk(top)
    return sorted(missing)


def with_broker(code, host, port):
    """The program with its BROKER line pointing at host:port."""
    return BROKER_LINE.sub('BROKER, PORT = "%s", %d' % (host, port), code, count=1)


def command(runtime, script, args=(), board=False):
    """(argv, env) that run a script as the docs say: CPython with firmware/
    on PYTHONPATH; the unix port with MICROPYPATH=firmware:.frozen (.frozen
    holds the port's asyncio and ssl), plus boards/unix for a board program."""
    env = dict(os.environ)
    args = [str(a) for a in args]
    if runtime == "cpython":
        env["PYTHONPATH"] = str(FIRMWARE)
        env["PYTHONUNBUFFERED"] = "1"
        return [sys.executable, str(script)] + args, env
    path = [str(FIRMWARE)] + ([str(BOARD_STANDINS)] if board else []) + [".frozen"]
    env["MICROPYPATH"] = os.pathsep.join(path)
    return [micropython_binary(), str(script)] + args, env


def run(runtime, script, args=(), cwd=None, board=False):
    """Run a script to its end; returns (returncode, stdout + stderr)."""
    cmd, env = command(runtime, script, args, board)
    try:
        p = subprocess.run(cmd, cwd=str(cwd or REPO), env=env, capture_output=True, text=True,
                           errors="replace", timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        out = b"".join(x if isinstance(x, bytes) else x.encode() for x in (e.stdout, e.stderr) if x)
        return None, "timed out after %ss\n%s" % (RUN_TIMEOUT_S, out.decode("utf-8", "replace"))
    return p.returncode, p.stdout + p.stderr
