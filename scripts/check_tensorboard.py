#!/usr/bin/env python3
"""Check that TensorBoard reads the event files mempo writes (lib/tbevent, --tb DIR).

    python3 scripts/check_tensorboard.py DIR

DIR holds update/ (events of a mempo-update run and its metrics.jsonl) and rollout/ (events of a
mempo-rollout run), as the Go tests write them with MEMPO_TB_OUT=DIR:
    MEMPO_TB_OUT=DIR go test ./cmd/mempo-update -run TensorBoard
    MEMPO_TB_OUT=DIR go test ./cmd/mempo-rollout -run TinyModel
Each directory is loaded with tensorboard's own EventAccumulator (what the TensorBoard server uses);
every update/<column> scalar must equal the metrics row's value at float32 precision, at the row's
step, and columns that are null in the row must be absent. Needs the tensorboard package; nothing
here runs at test time. Exits non-zero on the first mismatch.
"""
import json
import math
import os
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator as ea

d = sys.argv[1]


def load(sub):
    acc = ea.EventAccumulator(os.path.join(d, sub), size_guidance={ea.SCALARS: 0})
    acc.Reload()
    return acc


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


upd = load("update")
tags = upd.Tags()["scalars"]
rows = [json.loads(l) for l in open(os.path.join(d, "update", "metrics.jsonl"))]
print(f"update: {len(tags)} scalar tags, {len(rows)} metrics rows")
checked = 0
for col in rows[0]:
    tag = "update/" + col
    vals = [r[col] for r in rows]
    if col in ("step", "policy"):
        assert tag not in tags, f"{tag} should not be a scalar"
        continue
    if all(v is None for v in vals):
        assert tag not in tags, f"{tag}: null in every row but written"
        print(f"  {tag}: null in the rows, absent in TensorBoard (ok)")
        continue
    events = upd.Scalars(tag)
    got = {e.step: e.value for e in events}
    for r in rows:
        v = r[col]
        if v is None:
            assert r["step"] not in got, f"{tag} step {r['step']}: null in the row, {got[r['step']]} in TensorBoard"
            continue
        g = got[r["step"]]
        assert (math.isnan(g) and math.isnan(v)) or g == f32(float(v)), f"{tag} step {r['step']}: TensorBoard {g!r}, row {v!r}"
        checked += 1
print(f"update: {checked} values agree with the metrics rows")

ro = load("rollout")
rtags = sorted(ro.Tags()["scalars"])
print(f"rollout: {len(rtags)} scalar tags: {', '.join(rtags)}")
need = ["rollout/trajectories_done", "rollout/gen_tokens_per_s", "rollout/final_reward_task_mean"]
for t in need:
    assert t in rtags, f"{t} missing"
steps = [e.step for e in ro.Scalars("rollout/trajectories_done")]
assert steps == sorted(steps) and len(steps) >= 2, f"rollout steps {steps}"
done = ro.Scalars("rollout/trajectories_done")[-1].value
print(f"rollout: {len(steps)} events, last trajectories_done {done}")
print("OK: TensorBoard's EventAccumulator reads both files")
