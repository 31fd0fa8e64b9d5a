#!/usr/bin/env bash
# READER_MEMORY=both through run.sh (issue 18, CPU, 2026-12-06, sixth
# session): from each of the five PRESET=reader cold starts, a new reader
# (NEW_READER=1: the cold start's SFT model one epoch more on one subset row
# and one step row per SFT task, SCORE_READER=1) and MemPO and GRPO with it,
# the paper's R^M, three RL runs per cold start (RL seeds S, then 100·S + r;
# seed 1's runs 2 and 3 take RL seeds 2 and 3, as in ../three-seeds). The
# reader of ../mixed-reader with its row files in run.sh's order (subset v0…v7,
# then step v0…v7; by hand they went in glob order), so another draw.
# One run at a time on two cores, about 3 minutes a reader and 5 a run.
#   RUNS: the cold starts (seedS: a PRESET=reader run's directory, with
#   sft/, sft-react/, index/, variants/, world/ and sft-tasks*.jsonl)
set -euo pipefail
cd "$(dirname "$0")/../../../../../.."
RUNS=${RUNS:?the cold starts} OUT=${OUT:-runs/both-reader}
export OPENBLAS_CORETYPE=Zen OPENBLAS_NUM_THREADS=2   # as scripts/demo/run.sh pins them
export PRESET=reader READER_MEMORY=both SCORE_READER=1 EVAL_K="2 4"
one() {   # one SEED RUN
	local s=$1 r=$2 world=(WORLD=$RUNS/seed$1/world) rs=$1 out=$OUT/seed$1
	[ "$s" = 1 ] && world=()
	if [ "$r" = 1 ]; then
		env SEED="$s" FROM_SFT="$RUNS/seed$s" NEW_READER=1 "${world[@]}" OUT="$out" bash scripts/demo/run.sh
	else
		rs=$(( 100 * s + r )); [ "$s" = 1 ] && rs=$r
		env SEED="$s" RL_SEED=$rs FROM_SFT="$OUT/seed$s" "${world[@]}" OUT="$OUT/seed$s-rl$r" bash scripts/demo/run.sh
	fi
}
for r in 1 2 3; do for s in 4 1 2 3 5; do
	[ -f "$OUT/seed$s$([ $r = 1 ] || echo -rl$r)/summary.md" ] && continue   # resume
	t=$(date +%s) rc=0; one $s $r > "$OUT/seed$s-run$r.log" 2>&1 || rc=$?
	echo "seed $s run $r rc $rc wall $(( $(date +%s) - t ))s" >> "$OUT/chain.log"
done; done
OUT=$OUT SEEDS="1 2 3 4 5" RL_RUNS=3 EVAL_K="2 4" REUSE=1 bash scripts/demo/check.sh > "$OUT/check-seeds1-5.txt" || true
