"""Writing a run's traces: Parquet tables `published/` and `received/`
exactly as host_sim/schema.py defines them, plus run.json, under
<out>/run=<run_id>/."""
import json
from pathlib import Path

from . import schema


def write(out, run_id, published, received, meta):
    import pyarrow as pa
    import pyarrow.parquet as pq
    root = Path(out) / ("run=%s" % run_id)
    for name, rows in (("published", published), ("received", received)):
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        cols = schema.TABLES[name]
        table = pa.Table.from_pylist([{c: r.get(c) for c in schema.names(cols)} for r in rows],
                                     schema=schema.arrow_schema(cols))
        pq.write_table(table, d / "part-00000.parquet")
    (root / "run.json").write_text(json.dumps(meta, indent=1, default=str) + "\n")
    return root


def read(root, name):
    """A table of a written run as a list of dicts (for tests and tools)."""
    import pyarrow.parquet as pq
    return pq.read_table(Path(root) / name).to_pylist()
