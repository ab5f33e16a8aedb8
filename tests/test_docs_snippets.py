"""Every code block of README.md and docs/*.md that is a program runs, as a
user would paste it, on CPython and on the MicroPython unix port against a
mosquitto this module starts. The blocks are read from the Markdown at test
time (tests/docsnippets.py says how a block is marked)."""
import pytest

import docsnippets as ds

BLOCKS = ds.all_blocks()
PROGRAMS = [b for b in BLOCKS if ds.python_kind(b) in ("program", "board")]
RUNS = [pytest.param(b, rt, id="%s-%s" % (ds.block_id(b), rt))
        for b in PROGRAMS for rt in ds.RUNTIMES
        if rt == "micropython" or ds.python_kind(b) == "program"]


def test_every_block_says_what_it_is():
    """A fence without a language could hide a program from these tests; a
    Python block's info string is one of the kinds docsnippets knows."""
    for b in BLOCKS:
        assert b.info, "%s: a fenced block without a language" % ds.block_id(b)
        ds.python_kind(b)  # ValueError for an unknown python tag
    assert len(PROGRAMS) >= 8, [ds.block_id(b) for b in PROGRAMS]


@pytest.mark.parametrize("block", [b for b in BLOCKS if ds.python_kind(b)],
                         ids=ds.block_id)
def test_python_blocks_compile(block):
    compile(block.code, ds.block_id(block), "exec")


@pytest.mark.parametrize("block", PROGRAMS, ids=ds.block_id)
def test_programs_define_what_they_use(block):
    """A name used on a path the test run never takes (an except branch)
    still has to be defined: `time` in a retry loop, an import left out."""
    assert ds.undefined_names(block.code) == [], ds.block_id(block)


@pytest.mark.parametrize("block", PROGRAMS, ids=ds.block_id)
def test_programs_name_their_broker_on_one_line(block):
    if "BROKER" in block.code:
        assert ds.BROKER_LINE.search(block.code), (
            "%s: the broker goes on one line `BROKER, PORT = \"host\", port`" % ds.block_id(block))


@pytest.mark.parametrize("block,runtime", RUNS)
def test_program_runs(block, runtime, broker, tmp_path):
    script = tmp_path / "program.py"
    script.write_text(ds.with_broker(block.code, broker.host, broker.port))
    rc, out = ds.run(runtime, script, cwd=tmp_path, board=ds.python_kind(block) == "board")
    assert rc == 0, "%s on %s (exit %s):\n%s\n--- program ---\n%s" % (
        ds.block_id(block), runtime, rc, out[-4000:], block.code)
