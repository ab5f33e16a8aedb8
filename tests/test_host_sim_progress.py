"""The simulator's progress bar (tqdm) on a non-terminal stream."""
import io

from host_sim.run import Progress


def test_progress_reaches_the_total_with_its_status_text():
    out = io.StringIO()
    p = Progress(200, out=out)
    p.show(50, "50/200 acked")
    p.show(200, "4 devices done, 200 received", final=True)
    last = out.getvalue().replace("\r", "\n").strip().splitlines()[-1]
    assert "100%" in last and "200/200" in last and "4 devices done, 200 received" in last


def test_quiet_progress_writes_nothing():
    out = io.StringIO()
    p = Progress(10, out=out, quiet=True)
    p.show(10, "done", final=True)
    assert out.getvalue() == ""
