#!/usr/bin/env bash
# Scores run.sh's runs: F1 at k = 2, 4, 8 of MemPO with --mem-per-objective
# (f0: no floor; f05: --mem-std-floor 0.05) against the same cold start's
# MemPO and GRPO at the shipped preset and its SFT, per RL seed and pooled
# (seed 4's three RL seeds); seed 5's cold start (RL seed 5) on its own, and
# its shipped MemPO and GRPO over RL seeds 5, 502, 503.
#   usage: E=/tmp/cs P=/tmp/po BIN=… bash pool.sh OUTDIR
set -eu
out=$1; mkdir -p "$out"
E=${E:-/tmp/cs} P=${P:-/tmp/po}
score() { # score FILE [DIR:RUN:LABEL …]: sft, mempo, grpo from run.sh's DIR/eval; other labels from DIR/seedRUN (RUN = S-R)
	local f=$1 a=() x d r l k
	shift
	for x in "$@"; do
		IFS=: read -r d r l <<< "$x"
		for k in 2 4 8; do
			case $l in
			sft | mempo | grpo) a+=(--rollouts "$d/eval/$l-k$k.parquet" --label "$l") ;;
			*) a+=(--rollouts "$d/seed$r/eval-mempo-k$k.parquet" --label "$l") ;;
			esac
		done
	done
	"$BIN/mempo-score" "${a[@]}" --out "$out/$f" > "$out/scores-${f%.parquet}.md"
}
score rl4.parquet "$E/seed4:4:sft" "$E/seed4:4:mempo" "$E/seed4:4:grpo" "$P/f0:4-4:perobj-f0" "$P/f05:4-4:perobj-f05"
score rl401.parquet "$E/seed4-rl1:401:mempo" "$E/seed4-rl1:401:grpo" "$P/f05:4-401:perobj-f05"
score rl402.parquet "$E/seed4-rl2:402:mempo" "$E/seed4-rl2:402:grpo" "$P/f05:4-402:perobj-f05"
score seed5.parquet "$E/seed5:5:sft" "$E/seed5:5:mempo" "$E/seed5:5:grpo" "$P/f05:5-5:perobj-f05"
score seed5-pooled.parquet "$E/seed5:5:mempo" "$E/seed5:5:grpo" "$E/seed5-rl2:502:mempo" "$E/seed5-rl2:502:grpo" \
	"$E/seed5-rl3:503:mempo" "$E/seed5-rl3:503:grpo"
score pooled.parquet "$E/seed4:4:mempo" "$E/seed4:4:grpo" "$P/f05:4-4:perobj-f05" \
	"$E/seed4-rl1:401:mempo" "$E/seed4-rl1:401:grpo" "$P/f05:4-401:perobj-f05" \
	"$E/seed4-rl2:402:mempo" "$E/seed4-rl2:402:grpo" "$P/f05:4-402:perobj-f05"
