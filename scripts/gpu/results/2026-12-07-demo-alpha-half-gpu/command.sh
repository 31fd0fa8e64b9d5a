#!/usr/bin/env bash
# Issue 18 on the GPU: MemPO at --alpha 0.5 (the knob on) from the cold starts
# of ../2026-12-07-demo-check (same machine, right after it: /tmp/rr holds
# seedS/ with sft/, sft-react/, reader/, eval/), with the same RL seeds (S,
# 100·S + 2, 100·S + 3), all nine runs at once. MemPO only: run.sh is stopped
# when GRPO starts, then MemPO is evaluated greedily at k = 2, 4, 8 on the
# earlier run's test tasks (scripts/demo/mempo-only.sh, as
# ../2026-12-07-demo-fresh-noknob-cpu/noknob.sh does on the CPU). ALPHA picks α (0.5 by default; ALPHA=0.25 ran too).
#   carry: .work/mempool8.tar.xz     usage: command.sh [start|wait]
set -uo pipefail
ALPHA=${ALPHA:-0.5} E=/tmp/rr
R=/tmp/alpha${ALPHA/./} LIMIT=${LIMIT:-560}
B=/tmp/mempool8; [ -x $B/bin/mempo-rollout ] || tar -xJf .work/mempool8.tar.xz -C /tmp
. scripts/gpu/env.sh
. scripts/gpu/longjob.sh
gpu_env $B/lib
export BIN=$B/bin DEVICE=cuda PRESET=gpu EVAL_K="2 4 8" MEM_FLAGS="--mem-pool step --mem-skip-answer --alpha $ALPHA"
PACK_EXCLUDE=('*.parquet' '*.safetensors' 'iter[0-9]*' init '*-init' index variants sft-world 'rl-world-k*' world test-world
	'*tasks*.jsonl' 'tokenizer*.json' '*.html' '*.png' 'demos*' '*rows*.jsonl' 'answers*')
N=$R
. scripts/demo/mempo-only.sh
job() {
	for s in 1 2 3; do for r in $s $((100 * s + 2)) $((100 * s + 3)); do mempo_only $s $r & done; done
	wait
	local a=() s r d k
	for s in 1 2 3; do for r in $s $((100 * s + 2)) $((100 * s + 3)); do
		d=$(run_dir $E $s $r)
		for k in 2 4 8; do a+=(--rollouts $R/seed$s-$r/eval-mempo-k$k.parquet --label alpha${ALPHA/./}
			--rollouts $d/eval/mempo-k$k.parquet --label alpha1 --rollouts $d/eval/grpo-k$k.parquet --label grpo); done
		done
		for k in 2 4 8; do a+=(--rollouts $E/seed$s/eval/sft-k$k.parquet --label sft); done
	done
	$BIN/mempo-score "${a[@]}" --out $R/pooled-scores.jsonl > $R/score.txt 2>&1
	for s in 1 2 3; do for r in $s $((100 * s + 2)) $((100 * s + 3)); do
		for k in 2 4 8; do echo "seed$s-$r k$k $($BIN/mempo-score --rollouts $R/seed$s-$r/eval-mempo-k$k.parquet --out $R/seed$s-$r/score-k$k.jsonl 2>&1 | grep "| f1 ")"; done
	done; done > $R/per-run.txt
}
longjob "$0" "${1:-start}"
cat $R/done.txt 2>/dev/null; cat $R/score.txt 2>/dev/null | tail -30
exit 0
