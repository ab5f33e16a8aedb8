#!/usr/bin/env python3
"""Conformance coverage report: which client-side requirements the tests cite.

Reads the checklist tools/spec/conformance.md (the repository's copy of the
project's requirement list; --spec overrides), keeps the rows whose "client-side?" column is yes, and
scans every *.py file under tests/ (--tests overrides) for test functions
(names starting with "test") that cite a requirement id:

- in the function name:  test_MQTT_4_4_0_1_resend...  -> MQTT-4.4.0-1
                         test_U_3_3_4_a_alias...       -> U-3.3.4-a
- in a tag inside the function, in a comment or its docstring:
                         # [MQTT-4.3.2-1] [MQTT-4.9.0-1..3] [MQTT-4.6.0-2/3]
                         # [U-3.3.4-a..c] [MQTT-4.4.0-1, MQTT-4.6.0-1]

Ids are numbered per version and the two standards reuse some numbers for
different requirements (MQTT-4.3.3-2 is a QoS 2 *sender* rule in 5.0 and the
QoS 2 *receiver* rule in 3.1.1). So an id is read as MQTT 5.0 numbering; it
also counts for 3.1.1 when the 3.1.1 checklist has the same id for the same
requirement (or only 3.1.1 has that id). A version may be named explicitly in
a tag, `[MQTT-4.3.3-2 v3.1.1]` (also `v311`, `v4`, `v5`, `v5.0`), or in a name
with a prefix, `test_v311_MQTT_4_3_3_2_...`.

Prints, per version, the covered ids (with the tests citing them) and the
uncovered ones, then totals. Uncovered ids are a report, not a failure: the
exit status is 0 unless the checklist is missing or has no client-side rows
(then 2). --json prints the same data as JSON.
"""
import argparse
import ast
import io
import json
import re
import sys
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SPEC = REPO / "tools" / "spec" / "conformance.md"
DEFAULT_TESTS = REPO / "tests"

V5 = "5.0"
V311 = "3.1.1"
VERSIONS = (V5, V311)

# Ids in both checklists whose number stands for a different requirement in
# each standard (or a different scope): an unqualified citation means the
# MQTT 5.0 one; cite the 3.1.1 one with "v3.1.1".
RENUMBERED = frozenset((
    "MQTT-2.2.2-1",  # 5.0: Property Length present; 3.1.1: fixed-header flags
    "MQTT-3.1.2-4", "MQTT-3.1.2-5", "MQTT-3.1.2-6",  # CONNECT flag rules, worded differently
    "MQTT-3.14.4-1", "MQTT-3.14.4-2",  # send nothing more / close: swapped
    "MQTT-4.1.0-2",  # 5.0: server discards state; 3.1.1: session lifetime
    "MQTT-4.3.2-1", "MQTT-4.3.3-1",  # 3.1.1: the whole sender flow in one id
    "MQTT-4.3.2-2", "MQTT-4.3.3-2",  # 5.0: sender; 3.1.1: receiver
    "MQTT-4.7.1-1", "MQTT-4.7.1-2",  # shifted by one between the versions
))

_ID = r"(?:MQTT-\d+\.\d+\.\d+-\d+|U-\d+(?:\.\d+)+-[a-z])"
_ROW_ID = re.compile(r"^%s$" % _ID)
_NAME_ID = re.compile(
    r"(?:^|_)(?:(v311|v4|v5)_)?(MQTT_(\d+)_(\d+)_(\d+)_(\d+)|U_(\d+(?:_\d+)+)_([a-z]))(?=_|$)")
_TAG = re.compile(r"\[([^\[\]]+)\]")
_TAG_PART = re.compile(
    r"^\s*(MQTT|U)-(\d+(?:\.\d+)+)-([0-9a-z]+)"  # id
    r"(?:\.\.([0-9a-z]+)|((?:/[0-9a-z]+)+))?"  # range -1..3 or list -2/3
    r"((?:\s+\(?v?(?:5|5\.0|3\.1\.1|311|4)\)?)*)\s*$")
_QUALIFIER = {"5": V5, "5.0": V5, "3.1.1": V311, "311": V311, "4": V311}


class SpecError(Exception):
    pass


def parse_spec(path):
    """{version: {id: requirement}} for the client-side rows of the checklist."""
    path = Path(path)
    if not path.is_file():
        raise SpecError("conformance checklist not found: %s" % path)
    out = {v: {} for v in VERSIONS}
    for line in path.read_text(encoding="utf-8").splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cols) < 4 or not _ROW_ID.match(cols[0]):
            continue
        rid, version, text, client = cols[0], cols[1], " | ".join(cols[2:-1]), cols[-1]
        if version in out and client.lower() == "yes":
            out[version][rid] = text
    if not any(out.values()):
        raise SpecError("no client-side requirement rows in %s" % path)
    return out


def _expand(kind, section, first, upto, more):
    """Ids of one tag part: MQTT-4.9.0-1..3 -> -1, -2, -3; U-3.3.4-a/c -> -a, -c."""
    ends = [first]
    if upto:
        if first.isdigit() and upto.isdigit() and int(first) < int(upto):
            ends = [str(n) for n in range(int(first), int(upto) + 1)]
        elif len(first) == 1 and len(upto) == 1 and first.isalpha() and first < upto:
            ends = [chr(c) for c in range(ord(first), ord(upto) + 1)]
    elif more:
        ends += [e for e in more.split("/") if e]
    return ["%s-%s-%s" % (kind, section, e) for e in ends]


def ids_in_text(text):
    """[(id, version or None)] for every tag in a comment or docstring."""
    found = []
    for tag in _TAG.findall(text):
        for part in tag.split(","):
            m = _TAG_PART.match(part)
            if not m:
                continue
            kind, section, first, upto, more, quals = m.groups()
            versions = [_QUALIFIER[q.strip("()v")] for q in quals.split()] or [None]
            for rid in _expand(kind, section, first, upto, more):
                for v in versions:
                    found.append((rid, v))
    return found


def ids_in_name(name):
    """[(id, version or None)] cited in a test function name."""
    found = []
    for m in _NAME_ID.finditer(name):
        prefix = m.group(1)
        if m.group(3):
            rid = "MQTT-%s.%s.%s-%s" % m.group(3, 4, 5, 6)
        else:
            rid = "U-%s-%s" % (m.group(7).replace("_", "."), m.group(8))
        found.append((rid, _QUALIFIER[prefix[1:]] if prefix else None))
    return found


def _comments(source):
    """[(line, column, text)] of every comment in a source file."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                out.append((tok.start[0], tok.start[1], tok.string))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return out


def _start(node):
    lines = [node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())]
    return min(lines)


def _test_functions(tree, nlines):
    """(label, node, last line) of the test functions at module level and in
    classes; functions nested in a test belong to it. The last line reaches
    up to the next statement at the function's level, so comments after the
    function's last statement count too."""
    body = tree.body
    for k, node in enumerate(body):
        nxt = _start(body[k + 1]) - 1 if k + 1 < len(body) else nlines
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name.startswith("test"):
                yield node.name, node, nxt
        elif isinstance(node, ast.ClassDef):
            for j, sub in enumerate(node.body):
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                        sub.name.startswith("test"):
                    end = _start(node.body[j + 1]) - 1 if j + 1 < len(node.body) else nxt
                    yield "%s::%s" % (node.name, sub.name), sub, end


def scan_tests(tests_dir):
    """{test label: [(id, version or None)]} for every test citing an id, and
    a list of files that could not be parsed."""
    tests_dir = Path(tests_dir)
    cites = {}
    skipped = []
    for path in sorted(tests_dir.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        source = path.read_text(encoding="utf-8", errors="replace")
        try:
            tree = ast.parse(source, filename=str(path))
        except SyntaxError:
            skipped.append(str(path))
            continue
        comments = _comments(source)
        rel = path.relative_to(tests_dir).as_posix()
        nlines = len(source.splitlines())
        for label_name, fn, end in _test_functions(tree, nlines):
            found = ids_in_name(fn.name)
            for line, col, text in comments:
                # inside the function: indented deeper than its def
                if fn.lineno <= line <= end and col > fn.col_offset:
                    found += ids_in_text(text)
            doc = ast.get_docstring(fn)
            if doc:
                found += ids_in_text(doc)
            if found:
                label = "%s::%s" % (rel, label_name)
                cites[label] = found
    return cites, skipped


def versions_of(rid, qualified, spec):
    """The checklist versions a citation of rid counts for."""
    if qualified:
        return [qualified] if rid in spec[qualified] else []
    out = []
    if rid in spec[V5]:
        out.append(V5)
    if rid in spec[V311] and rid not in RENUMBERED:
        out.append(V311)
    return out


def coverage(spec, cites):
    """{version: {id: [tests]}} plus {cited id: [tests]} for citations that
    match no client-side row of the version they are read in."""
    covered = {v: {} for v in VERSIONS}
    unmatched = {}
    for label in sorted(cites):
        for rid, qual in cites[label]:
            vs = versions_of(rid, qual, spec)
            if not vs:
                key = rid if not qual else "%s (%s)" % (rid, qual)
                tests = unmatched.setdefault(key, [])
                if label not in tests:
                    tests.append(label)
            for v in vs:
                tests = covered[v].setdefault(rid, [])
                if label not in tests:
                    tests.append(label)
    return covered, unmatched


def _order(rid):
    """Sort ids in section order: MQTT-4.10.0-1 after MQTT-4.9.0-1."""
    kind, rest = rid.split("-", 1)
    section, item = rest.rsplit("-", 1)
    nums = [int(x) for x in section.split(".")]
    return nums, kind, int(item) if item.isdigit() else 0, item


def report(spec, covered, unmatched, spec_path, tests_dir, skipped, verbose=False):
    lines = ["Conformance coverage: client-side requirements of %s" % spec_path,
             "cited by the tests in %s" % tests_dir]
    total = hit = 0
    for v in VERSIONS:
        ids = sorted(spec[v], key=_order)
        got = [i for i in ids if i in covered[v]]
        total += len(ids)
        hit += len(got)
        pct = 100.0 * len(got) / len(ids) if ids else 0.0
        lines.append("")
        lines.append("== MQTT %s: %d of %d client-side ids covered (%.0f%%) ==" % (
            v, len(got), len(ids), pct))
        lines.append("covered:")
        for i in got:
            tests = covered[v][i]
            shown = tests if verbose or len(tests) <= 3 else tests[:3]
            more = "" if len(shown) == len(tests) else " (+%d more)" % (len(tests) - len(shown))
            lines.append("  %-15s %s%s" % (i, ", ".join(shown), more))
        lines.append("not covered:")
        for i in ids:
            if i not in covered[v]:
                lines.append("  %-15s %s" % (i, spec[v][i]))
    if unmatched:
        lines.append("")
        lines.append("cited, but not a client-side id of the checklist (server-side, "
                     "outside the checklist, or a typo):")
        for rid in sorted(unmatched):
            lines.append("  %-15s %s" % (rid, ", ".join(unmatched[rid])))
    if skipped:
        lines.append("")
        lines.append("not scanned (syntax error): %s" % ", ".join(skipped))
    lines.append("")
    parts = ["MQTT %s %d/%d" % (v, len([i for i in spec[v] if i in covered[v]]), len(spec[v]))
             for v in VERSIONS]
    lines.append("TOTAL: %d of %d client-side ids covered (%s)" % (hit, total, ", ".join(parts)))
    return "\n".join(lines)


def as_json(spec, covered, unmatched, spec_path, skipped):
    out = {"spec": str(spec_path), "versions": {}, "unmatched": unmatched, "skipped": skipped}
    hit = total = 0
    for v in VERSIONS:
        ids = sorted(spec[v], key=_order)
        cov = {i: covered[v][i] for i in ids if i in covered[v]}
        out["versions"][v] = {"ids": ids, "covered": cov,
                              "uncovered": [i for i in ids if i not in cov]}
        hit += len(cov)
        total += len(ids)
    out["totals"] = {"covered": hit, "ids": total}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", default=str(DEFAULT_SPEC), help="conformance checklist (markdown)")
    ap.add_argument("--tests", default=str(DEFAULT_TESTS), help="directory of tests to scan")
    ap.add_argument("--json", action="store_true", help="print JSON instead of text")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every citing test")
    args = ap.parse_args(argv)
    try:
        spec = parse_spec(args.spec)
    except SpecError as e:
        print("conformance: %s" % e, file=sys.stderr)
        return 2
    tests_dir = Path(args.tests)
    if not tests_dir.is_dir():
        print("conformance: tests directory not found: %s" % tests_dir, file=sys.stderr)
        return 2
    cites, skipped = scan_tests(tests_dir)
    covered, unmatched = coverage(spec, cites)
    if args.json:
        print(json.dumps(as_json(spec, covered, unmatched, args.spec, skipped), indent=1))
    else:
        print(report(spec, covered, unmatched, args.spec, tests_dir, skipped, args.verbose))
    return 0


if __name__ == "__main__":
    sys.exit(main())
