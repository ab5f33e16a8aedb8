"""The pieces of `make compare` that need no network: the pins, unpacking an
sdist the way upip did, and the README table update."""
import io
import re
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
import compare  # noqa: E402
import fetch_competitors  # noqa: E402


def test_every_compared_package_is_pinned_with_a_sha256():
    pins = fetch_competitors.pins()
    names = {p[0] for p in pins}
    for packages, modules in compare.LIBS.values():
        assert set(packages) <= names
        assert modules
    for name, version, sha in pins:
        assert re.fullmatch(r"[0-9a-f]{64}", sha), name
        assert version[0].isdigit()
    assert set(compare.FEATURES) == set(compare.ORDER) == set(compare.N_ALLOC)
    assert set(compare.HEAP_RUN) == set(compare.ORDER)
    for script, *args in compare.HEAP_RUN.values():  # each library's own heap script
        assert (REPO / "bench" / "mp" / (script + ".py")).is_file(), script


def sdist(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_unpack_keeps_only_the_modules(tmp_path):
    data = sdist({"pkg-1.0/setup.py": "x", "pkg-1.0/PKG-INFO": "x",
                  "pkg-1.0/umqtt/simple.py": "A = 1\n",
                  "pkg-1.0/pkg.egg-info/requires.txt": "dep",
                  "pkg-1.0/pkg.egg-info/x.py": "no", "pkg-1.0/README.rst": "r",
                  "pkg-1.0/top.py": "B = 2\n"})
    fetch_competitors.unpack(data, tmp_path)
    got = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert got == ["top.py", "umqtt/simple.py"]
    assert (tmp_path / "umqtt" / "simple.py").read_text() == "A = 1\n"


def test_readme_table_is_replaced_between_markers(tmp_path, monkeypatch):
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n## Layout\n")
    monkeypatch.setattr(compare, "README", readme)
    compare.write_readme("| a |", "2026-01-01", "box")
    first = readme.read_text()
    assert "## Compared with other MicroPython MQTT clients" in first and "| a |" in first
    compare.write_readme("| b |", "2026-01-02", "box")
    second = readme.read_text()
    assert "| b |" in second and "| a |" not in second
    assert second.count(compare.MARK_BEGIN) == 1 and second.startswith("# x\n\n## Layout\n")


def test_the_results_notes_take_every_figure_they_name():
    # the notes are a %-format: a stray "%" in their text once lost a
    # 15-minute run at its very end
    text = compare.NOTES % dict(n0="frugalmqtt 1000/1000", repeat=5, ms=2000,
                                heap_why="frugalmqtt: MemoryError")
    assert "median of 5 interleaved runs of 2000 ms" in text
    assert "frugalmqtt 1000/1000" in text and "frugalmqtt: MemoryError" in text
    assert "%(" not in text
