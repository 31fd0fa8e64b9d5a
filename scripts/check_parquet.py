#!/usr/bin/env python3
"""Cross-check that pyarrow reads the Parquet files mempo writes (lib/records), and make the
pyarrow-written fixtures the Go tests read back.

    python3 scripts/check_parquet.py [DIR]      # DIR defaults to testdata/score

Reads DIR/rollouts-go.parquet and checks every value against DIR/rollouts-go.jsonl (the same
rows, written by the same Go code as JSONL); reads DIR/metrics-go.parquet; prints the schemas.
Then writes DIR/rollouts-pyarrow.parquet and DIR/metrics-pyarrow.parquet with pyarrow's own
writer (default options: snappy, its own nested-list naming) from the tables it read.
Also reads any extra Parquet files named on the command line after DIR and prints their
schema and row count (e.g. a scores.parquet from mempo-score).
Needs pyarrow; nothing here runs at test time.
"""
import json, math, os, sys
import pyarrow as pa
import pyarrow.parquet as pq

d = sys.argv[1] if len(sys.argv) > 1 else "testdata/score"

def same(a, b, path="row"):
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            assert a is None and b is None, f"{path}: {a!r} != {b!r}"
            return
        # float32 log-probs come back widened; compare at float32 precision
        assert math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-7), f"{path}: {a!r} != {b!r}"
    elif isinstance(a, dict):
        for k in b:
            same(a.get(k), b[k], f"{path}.{k}")
    elif isinstance(a, list) or isinstance(b, list):
        a, b = a or [], b or []
        assert len(a) == len(b), f"{path}: len {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    else:
        assert a == b or (a in (None, "") and b in (None, "")), f"{path}: {a!r} != {b!r}"

t = pq.read_table(os.path.join(d, "rollouts-go.parquet"))
print("rollouts-go.parquet schema (pyarrow %s):" % pa.__version__)
print(t.schema)
rows = t.to_pylist()
want = [json.loads(l) for l in open(os.path.join(d, "rollouts-go.jsonl"))]
assert len(rows) == len(want), (len(rows), len(want))
for i, (r, w) in enumerate(zip(rows, want)):
    same(r, w, f"row{i+1}")
assert pa.types.is_list(t.schema.field("golds").type)
assert pa.types.is_list(t.schema.field("golds").type.value_type)
steps = t.schema.field("steps").type
assert pa.types.is_list(steps) and pa.types.is_struct(steps.value_type)
print("rollouts: %d rows, all values equal the JSONL copy" % len(rows))
pq.write_table(t, os.path.join(d, "rollouts-pyarrow.parquet"))

m = pq.read_table(os.path.join(d, "metrics-go.parquet"))
print(m.schema)
print("metrics: %d rows" % m.num_rows, m.column("reward_task_mean").to_pylist())
# Metrics a run did not compute are nulls, not zeros.
for col in ("entropy", "reward_mem_mean", "adv_mem_mean"):
    vals = m.column(col).to_pylist()
    assert vals[-1] is None and vals[0] is not None, (col, vals)
print("metrics: entropy, reward_mem_mean, adv_mem_mean null where not computed")
pq.write_table(m, os.path.join(d, "metrics-pyarrow.parquet"))

for extra in sys.argv[2:]:
    x = pq.read_table(extra)
    print(extra, x.num_rows, "rows")
    print(x.schema)
    print(x.slice(0, 5).to_pylist())
print("OK")
