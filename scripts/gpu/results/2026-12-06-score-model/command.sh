#!/usr/bin/env bash
# One GPU call: mempo-rollout --score-model on CUDA. The PRESET=gpu cold start
# of seed 1 (scripts/gpu/results/2026-12-06-demo-coldstart) samples the 32
# k = 8 test tasks of data/world, 8 samples each, three times with the same
# seed: its own memory reward; --score-model the same weights (the terms
# must be equal); --score-model the reader fine-tuned for 4,500 steps
# (2026-12-06-demo-coldstart/cpu-scorer-copy, reader6): the trajectories must
# be equal, the terms the reader's. memdrops prints each file's terms.
#   carry: .work/mempool.tar.xz (mempo-rollout and memdrops built at ddfc819),
#   .work/scorecheck (sft/: the cold start, reader/: the reader)
set -uo pipefail
B=/tmp/mempool; rm -rf $B; tar -xJf .work/mempool.tar.xz -C /tmp
. scripts/gpu/env.sh
gpu_env $B/lib
$B/bin/mempo-index --corpus data/world/corpus.jsonl --out /tmp/ix > /dev/null
A=(--model .work/scorecheck/sft --tasks data/world/test-k8.jsonl --index /tmp/ix --max-step-tokens 64 --topk 2 --hint=false
   --score-gold-numbered --score-lead-in "<think>all {k} answers are known</think><answer>" --batch 128 --overwrite
   --group 8 --temperature 1 --seed 7 --device ${DEVICE:-cuda})
$B/bin/mempo-rollout "${A[@]}" --out $OUT/own.parquet 2>&1 | tail -1
$B/bin/mempo-rollout "${A[@]}" --score-model .work/scorecheck/sft --out $OUT/self.parquet 2>&1 | tail -1
$B/bin/mempo-rollout "${A[@]}" --score-model .work/scorecheck/reader --out $OUT/reader.parquet 2>&1 | tail -1
$B/bin/memdrops $OUT/own.parquet $OUT/self.parquet $OUT/reader.parquet
# Step by step (pyarrow, on the GPU machine): the outputs equal in all three,
# the memory terms equal between own and self, and how many differ for the reader.
python3 - $OUT <<'PY'
import sys, pyarrow.parquet as pq
rows = {n: pq.read_table(f"{sys.argv[1]}/{n}.parquet").column("steps").to_pylist() for n in ("own", "self", "reader")}
steps = lambda n: [s for traj in rows[n] for s in traj]
own, self_, reader = steps("own"), steps("self"), steps("reader")
same_out = all(a["output_ids"] == b["output_ids"] == c["output_ids"] for a, b, c in zip(own, self_, reader)) and len(own) == len(self_) == len(reader)
terms = lambda s: (s["p_gold_mem"], s["p_gold_hist"], s["r_mem"])
print(f"{len(own)} steps; outputs equal in all three: {same_out}; memory terms own == self: {sum(terms(a) == terms(b) for a, b in zip(own, self_))} of {len(own)}; own != reader: {sum(terms(a) != terms(c) for a, c in zip(own, reader))}")
PY
