"""tools/conformance.py: the coverage report over the spec checklist and tests/."""
import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOOL = REPO / "tools" / "conformance.py"
SPEC = REPO / "tools" / "spec" / "conformance.md"
SESSION_TESTS = [REPO / "tests" / "device" / "test_session_flows.py",
                 REPO / "tests" / "device" / "test_session_errors.py"]


def run(*args, cwd=REPO):
    return subprocess.run([sys.executable, str(TOOL), *args], cwd=str(cwd),
                          capture_output=True, text=True, timeout=120)


def report_json(*args):
    p = run("--json", *args)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def name_ids(path):
    """Ids in test names, read independently of the tool."""
    out = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            for m in re.finditer(r"MQTT_(\d+)_(\d+)_(\d+)_(\d+)", node.name):
                out.add("MQTT-%s.%s.%s-%s" % m.groups())
            for m in re.finditer(r"_U_((?:\d+_)+)([a-z])(?=_|$)", node.name):
                out.add("U-%s-%s" % (m.group(1).rstrip("_").replace("_", "."), m.group(2)))
    return out


def test_text_report_runs_and_totals():
    p = run()
    assert p.returncode == 0, p.stderr
    assert "== MQTT 5.0:" in p.stdout and "== MQTT 3.1.1:" in p.stdout
    m = re.search(r"TOTAL: (\d+) of (\d+) client-side ids covered", p.stdout)
    assert m and 0 < int(m.group(1)) <= int(m.group(2))
    assert "not covered:" in p.stdout


def test_finds_the_session_test_ids():
    data = report_json()
    v5 = data["versions"]["5.0"]
    client_ids = set(v5["ids"])
    cited = set()
    for path in SESSION_TESTS:
        cited |= name_ids(path)
    expected = cited & client_ids
    assert len(expected) >= 30, sorted(expected)  # the session tests name that many
    missing = expected - set(v5["covered"])
    assert not missing, sorted(missing)
    # The covering tests are named, file::function
    assert any(t.endswith("test_session_flows.py::test_MQTT_4_4_0_1_resend_pubrel_then_publish_dup")
               for t in v5["covered"]["MQTT-4.4.0-1"])
    # 3.1.1 ids come from shared numbers and from "v3.1.1" tags in comments
    v311 = data["versions"]["3.1.1"]["covered"]
    for rid in ("MQTT-4.4.0-1", "MQTT-4.6.0-4", "MQTT-4.3.3-1", "MQTT-4.3.3-2", "MQTT-2.3.1-6"):
        assert rid in v311, rid
    assert data["totals"]["covered"] == len(v5["covered"]) + len(v311)
    assert data["totals"]["ids"] == len(v5["ids"]) + len(data["versions"]["3.1.1"]["ids"])


def test_found_from_another_working_directory(tmp_path):
    p = run(cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert str(SPEC) in p.stdout or "conformance.md" in p.stdout


def test_runs_in_a_clone_on_its_own(tmp_path):
    """The checklist is in the repository: a copy with no ../shared beside it
    gives the same report."""
    clone = tmp_path / "frugalmqtt"
    for d in ("tools", "tests"):
        shutil.copytree(REPO / d, clone / d, ignore=shutil.ignore_patterns("__pycache__"))
    assert not (tmp_path / "shared").exists()
    p = subprocess.run([sys.executable, str(clone / "tools" / "conformance.py"), "--json"],
                       cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    alone = json.loads(p.stdout)
    assert alone["spec"] == str(clone / "tools" / "spec" / "conformance.md")
    here = report_json()
    assert {k: v for k, v in alone.items() if k != "spec"} == json.loads(
        json.dumps({k: v for k, v in here.items() if k != "spec"}).replace(
            str(REPO), str(clone)))
    assert alone["totals"]["ids"] > 0


def test_missing_spec_fails(tmp_path):
    p = run("--spec", str(tmp_path / "nope.md"))
    assert p.returncode != 0
    assert "not found" in p.stderr
    empty = tmp_path / "empty.md"
    empty.write_text("# nothing here\n")
    assert run("--spec", str(empty)).returncode != 0


SYNTH_SPEC = """# checklist
## MQTT v5.0
ID | version | one-line requirement | client-side? (yes/no)
---|---|---|---
MQTT-4.4.0-1 | 5.0 | resend on reconnect | yes
MQTT-4.3.3-2 | 5.0 | QoS 2 sender DUP 0 | yes
MQTT-4.9.0-1 | 5.0 | quota starts | yes
MQTT-4.9.0-2 | 5.0 | quota decrements | yes
MQTT-4.9.0-3 | 5.0 | keep answering | yes
U-3.3.4-a | 5.0 | alias 0 | yes
U-3.3.4-b | 5.0 | alias update | yes
U-3.3.4-c | 5.0 | alias unknown | yes
MQTT-4.6.0-2 | 5.0 | PUBACK order | yes
MQTT-4.6.0-3 | 5.0 | PUBREC order | yes
MQTT-3.3.1-5 | 5.0 | server retains | no
MQTT-1.5.4-1 | 5.0 | never cited | yes
## MQTT v3.1.1
ID | version | one-line requirement | client-side? (yes/no)
---|---|---|---
MQTT-4.4.0-1 | 3.1.1 | resend on reconnect | yes
MQTT-4.3.3-2 | 3.1.1 | QoS 2 receiver | yes
MQTT-2.3.1-5 | 3.1.1 | no id on QoS 0 | yes
"""

SYNTH_TESTS = '''
def test_MQTT_4_4_0_1_resend():
    pass


def test_v311_MQTT_4_3_3_2_receiver_and_U_3_3_4_b_update():
    pass


def test_ranges_and_lists():
    """Docstring tag [U-3.3.4-a..c]"""
    x = 1  # [MQTT-4.9.0-1..3] and [MQTT-4.6.0-2/3]
    # [MQTT-4.3.3-2] [MQTT-2.3.1-5] [MQTT-3.3.1-5] [not an id] [MQTT-9.9.9-9]
# [MQTT-1.5.4-1] a top-level comment after a test: not part of it


def helper():
    # [MQTT-1.5.4-1] in a helper: not a test
    pass

# [MQTT-1.5.4-1] outside any test


class TestGrouped:
    def test_method(self):
        pass  # [MQTT-4.4.0-1 v5]
'''


def test_synthetic_names_tags_and_versions(tmp_path):
    spec = tmp_path / "spec.md"
    spec.write_text(SYNTH_SPEC)
    tests = tmp_path / "tests"
    (tests / "sub").mkdir(parents=True)
    (tests / "sub" / "test_synth.py").write_text(SYNTH_TESTS)
    (tests / "test_broken.py").write_text("def test_MQTT_1_5_4_1_x(:\n")
    data = report_json("--spec", str(spec), "--tests", str(tests))
    v5 = data["versions"]["5.0"]
    v311 = data["versions"]["3.1.1"]
    f = "sub/test_synth.py::"
    assert v5["covered"] == {
        "MQTT-4.3.3-2": [f + "test_ranges_and_lists"],
        "MQTT-4.4.0-1": [f + "TestGrouped::test_method", f + "test_MQTT_4_4_0_1_resend"],
        "MQTT-4.6.0-2": [f + "test_ranges_and_lists"],
        "MQTT-4.6.0-3": [f + "test_ranges_and_lists"],
        "MQTT-4.9.0-1": [f + "test_ranges_and_lists"],
        "MQTT-4.9.0-2": [f + "test_ranges_and_lists"],
        "MQTT-4.9.0-3": [f + "test_ranges_and_lists"],
        "U-3.3.4-a": [f + "test_ranges_and_lists"],
        "U-3.3.4-b": [f + "test_ranges_and_lists",
                      f + "test_v311_MQTT_4_3_3_2_receiver_and_U_3_3_4_b_update"],
        "U-3.3.4-c": [f + "test_ranges_and_lists"],
    }
    assert v5["uncovered"] == ["MQTT-1.5.4-1"]  # server-side rows are not listed at all
    # MQTT-4.3.3-2 means something else in 3.1.1: only the qualified name counts;
    # MQTT-4.4.0-1 is shared; MQTT-2.3.1-5 exists only in 3.1.1
    assert v311["covered"] == {
        "MQTT-2.3.1-5": [f + "test_ranges_and_lists"],
        "MQTT-4.3.3-2": [f + "test_v311_MQTT_4_3_3_2_receiver_and_U_3_3_4_b_update"],
        "MQTT-4.4.0-1": [f + "test_MQTT_4_4_0_1_resend"],
    }
    assert v311["uncovered"] == []
    assert set(data["unmatched"]) == {"MQTT-3.3.1-5", "MQTT-9.9.9-9"}
    assert data["totals"] == {"covered": 13, "ids": 14}
    assert data["skipped"] and data["skipped"][0].endswith("test_broken.py")
    text = run("--spec", str(spec), "--tests", str(tests))
    assert text.returncode == 0
    assert "TOTAL: 13 of 14 client-side ids covered (MQTT 5.0 10/11, MQTT 3.1.1 3/3)" in text.stdout
