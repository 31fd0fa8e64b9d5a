#!/usr/bin/env bash
# make demo-check's comparisons (scripts/demo/check.sh REUSE=1 RL_RUNS=3) on
# the CPU's three cold starts from scratch at the shipped PRESET=gpu: seeds 4,
# 5 and 6, three RL runs each (seed 4's RL seeds 4, 401, 402; seed 5's 5,
# 502, 503; seed 6's 6, 602, 603; seed 7's 7, 702, 703 in ../2026-12-07-demo-cpu-seed7),
# laid out as check.sh expects by links; SEEDS picks the cold starts, NEW the
# one whose tables and memdrops are copied.
#   usage: E=/tmp/cs BIN=… [SEEDS="4 5 6"] [NEW=6] bash check.sh OUTDIR   (from the repository root)
set -u
E=${E:-/tmp/cs} C=/tmp/chk-$$ out=$1 SEEDS=${SEEDS:-4 5 6} NEW=${NEW:-6}
rm -rf $C; mkdir -p $C "$out"
for s in $SEEDS; do
	ln -s $E/seed$s $C/seed$s
	if [ $s = 4 ]; then ln -s $E/seed4-rl1 $C/seed4-rl2; ln -s $E/seed4-rl2 $C/seed4-rl3; continue; fi
	for r in 2 3; do ln -s $E/seed$s-rl$r $C/seed$s-rl$r; done
done
SEEDS="$SEEDS" OUT=$C RL_RUNS=3 REUSE=1 EVAL_K="2 4 8" bash scripts/demo/check.sh > "$out/check.txt" 2>&1
echo "check rc $?" >> "$out/check.txt"
cp $C/pooled.md "$out/" 2>/dev/null
for x in seed$NEW seed$NEW-rl2 seed$NEW-rl3; do
	cp $E/$x/summary.md "$out/$x-summary.md" 2>/dev/null
	for v in mempo grpo; do
		"$BIN/memdrops" $(ls $E/$x/$v/rollouts-*.parquet | sort -V) > "$out/memdrops-$v-$x.txt" 2>&1
	done
done
