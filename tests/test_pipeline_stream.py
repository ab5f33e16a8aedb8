"""The streaming job keeps the per-sensor windows current as collected files
arrive, with the same numbers as the batch analytics."""
import datetime as dt

from pipeline import stream
from pipeline.traces import write_arrow
from tracekit import T0, columns, rcv, write_run


def rows(run, seqs, first_arrival=0, dup=False):
    # device d1: one message every 20 s, value = seq
    return [rcv("live", "col", first_arrival + i, "d1", s, 1, T0 + s * 20000 + 5,
                T0 + s * 20000, value=float(s), dup=dup) for i, s in enumerate(seqs)]


def windows(spark, out, w):
    return {r.start: (r["count"], r["min"], r["max"], r["mean"])
            for r in spark.read.parquet("%s/windows_%s" % (out, w)).collect()}


def test_stream_updates_windows_as_files_arrive(spark, tmp_path):
    traces, out = str(tmp_path / "traces"), str(tmp_path / "live")
    write_run(traces, "live", [], rows("live", [0, 1, 2]), parts=2)
    stream.run(spark, traces, out, ("1m", "1h"), once=True)
    t0 = dt.datetime(2026, 1, 1)
    assert windows(spark, out, "1m") == {t0: (3, 0.0, 2.0, 1.0)}

    # A new file: seq 3 and 4 (next minute) and seq 2 again (a redelivery)
    more = rows("live", [3, 4], 3) + rows("live", [2], 5, dup=True)
    write_arrow(columns(more, "received"), "received", traces + "/run=live/received/part-9.parquet")
    stream.run(spark, traces, out, ("1m", "1h"), once=True)
    assert windows(spark, out, "1m") == {t0: (3, 0.0, 2.0, 1.0),
                                         t0 + dt.timedelta(minutes=1): (2, 3.0, 4.0, 3.5)}
    assert windows(spark, out, "1h") == {t0: (5, 0.0, 4.0, 2.0)}
