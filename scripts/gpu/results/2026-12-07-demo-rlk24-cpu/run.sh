#!/usr/bin/env bash
# RL on k = 2 and 4 only (the paper trains short and tests long) at the
# current PRESET=gpu (α = 0.5), MemPO and GRPO, from the fresh cold starts of
# ../2026-12-07-demo-new-preset-cpu (E=/tmp/fresh: seeds 4, 5; /tmp/fresh67:
# 6, 7), RL seed = seed; two chains of two runs, one OpenBLAS thread each.
# Commands built at dbe979b (.work/mempool8/bin). Outputs under /tmp/rlk24.
cd "$(dirname "$0")/../../../.."
mkdir -p /tmp/rlk24
export OPENBLAS_CORETYPE=Zen OPENBLAS_NUM_THREADS=1
export BIN=${BIN:-$PWD/.work/mempool8/bin} PRESET=gpu DEVICE=cpu EVAL_K="2 4 8" RL_K="2 4"
run() { local s=$1 E=$2 t=$(date +%s)
	SEED=$s RL_SEED=$s FROM_SFT=$E/seed$s OUT=/tmp/rlk24/seed$s bash scripts/demo/run.sh > /tmp/rlk24/seed$s.log 2>&1
	echo "seed $s rc $? wall $(( $(date +%s) - t ))s" >> /tmp/rlk24/done.txt; }
[ "${1:-}" = pool ] || {
	( run 4 /tmp/fresh; run 6 /tmp/fresh67 ) &
	( run 5 /tmp/fresh; run 7 /tmp/fresh67 ) &
	wait
}
# Pooled: these runs (rlk24-mempo, rlk24-grpo) against the same cold starts
# and RL seeds trained on k = 2, 4, 8 (mix-mempo: α = 0.5 from
# ../2026-12-07-demo-alpha-half-cpu, N=/tmp/alpha05; mix-grpo: the preset's
# own runs), and SFT.
a=()
for s in 4 5 6 7; do E=/tmp/fresh; [ $s -ge 6 ] && E=/tmp/fresh67
	for k in 2 4 8; do a+=(--rollouts /tmp/rlk24/seed$s/eval/mempo-k$k.parquet --label rlk24-mempo
		--rollouts /tmp/rlk24/seed$s/eval/grpo-k$k.parquet --label rlk24-grpo
		--rollouts /tmp/alpha05/seed$s-$s/eval-mempo-k$k.parquet --label mix-mempo
		--rollouts $E/seed$s/eval/grpo-k$k.parquet --label mix-grpo --rollouts $E/seed$s/eval/sft-k$k.parquet --label sft); done
done
$BIN/mempo-score "${a[@]}" --out scripts/gpu/results/2026-12-07-demo-rlk24-cpu/pooled-scores.jsonl
