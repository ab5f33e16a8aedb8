"""Read host_sim's traces (``DIR/run=<id>/published``, ``.../received``) with the
shared schemas of host_sim.schema; write received rows the same way."""
import os

from host_sim import schema


def read(spark, traces, table):
    """All runs' rows of `table` ("published" or "received") under `traces`
    (a folder of run=<id>/ folders, or one run=<id>/ folder); an empty
    DataFrame (same schema) when no run has that table."""
    from pyspark.errors import AnalysisException
    sch = schema.spark_schema(schema.TABLES[table])
    path = "%s/%s" % (runs(traces), table)
    try:
        # Explicit schema: the files are never sampled for types; a column a
        # writer forgot fails here, not in the middle of the audit.
        return spark.read.schema(sch).option("recursiveFileLookup", "true").parquet(path)
    except AnalysisException as e:
        if "PATH_NOT_FOUND" not in str(e) and "does not exist" not in str(e):
            raise
        return spark.createDataFrame([], sch)


def runs(traces):
    """The glob of run folders under `traces`."""
    traces = traces.rstrip("/")
    return traces if os.path.basename(traces).startswith("run=") else traces + "/run=*"


def write_arrow(rows, table, path):
    """Write `rows` (a dict of columns) as one Parquet file with the shared
    schema. Writes a dot-file first and renames it, so a reader (Spark
    ignores dot-files) never sees half a file."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    t = pa.table(rows, schema=schema.arrow_schema(schema.TABLES[table]))
    d, name = os.path.split(path)
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, "." + name + ".tmp")
    pq.write_table(t, tmp)
    os.replace(tmp, path)
