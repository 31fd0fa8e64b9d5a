#!/usr/bin/env bash
# make demo-check: the demo over three seeds (world, model init and sampling
# all change with the seed), then the issue's comparisons, on the seeds
# pooled (mempo-score over every seed's evaluation rollouts under one label:
# one bootstrap 95% interval over all the seeds' test tasks, 3 × EVAL_TASKS per k):
#
#   1. RL beats SFT at every k: pooled F1 of MemPO-RL and of GRPO-RL > SFT's;
#   2. MemPO-RL > GRPO-RL (pooled F1) at k = 4 and k = 8, and at k = 8 their
#      95% intervals do not overlap (MemPO's low end above GRPO's high end);
#   3. mean P(gold | mem) of the training rollouts rises over MemPO's
#      iterations (last − first > 0, pooled over seeds) and by more than
#      over GRPO's (GRPO's rollouts score R^M too, GRPO_RM=1; its updates
#      ignore it);
#   4. peak tokens stay flat in k under MemPO and grow under ReAct: MemPO's
#      peak at the largest k over its peak at the smallest is below ReAct's.
#
# It prints every number it compares and the pooled and per-seed tables
# (also in $OUT/pooled.md) and fails when any comparison fails. Not part of
# CI: it runs three demos (about 15 minutes a seed on two CPU cores at the
# default PRESET=small; scripts/gpu/demo.sh check runs it on an H200).
# REUSE=1 skips the runs and checks the seeds already under $OUT.
#
# RL_RUNS=N runs MemPO's and GRPO's RL N times per seed from the seed's one
# cold start (run 1 is $OUT/seedS itself; run r > 1 is $OUT/seedS-rlR, with
# FROM_SFT and RL_SEED=100·S + r): two RL runs of one method from one cold
# start can differ by more than the methods do (docs/DEMO.md, "Four RL runs
# per method from one cold start"), so MemPO's and GRPO's pooled rows then
# take every run (SFT's and ReAct's, the same checkpoints, the first's).
set -euo pipefail
SEEDS=${SEEDS:-"1 2 3"}
OUT=${OUT:-runs/demo-check}
BIN=${BIN:-bin}
EVAL_K=${EVAL_K:-"2 4 8"}
REUSE=${REUSE:-0}
PARALLEL=${PARALLEL:-0}               # 1: run the seeds at once (scripts/gpu/demo.sh check does)
RL_RUNS=${RL_RUNS:-1}                 # RL runs per method and seed, from the seed's one cold start (above)
case $RL_RUNS in '' | *[!0-9]* | 0) echo "RL_RUNS=$RL_RUNS: want a count of at least 1" >&2; exit 2 ;; esac
# rl_dirs S: the directories of seed S's RL runs, the first one first.
rl_dirs() { echo "$OUT/seed$1"; for r in $(seq 2 "$RL_RUNS"); do echo "$OUT/seed$1-rl$r"; done; }
here=$(dirname "$0")

# launch LOG VAR=VALUE…: one run.sh with those variables (and GRPO_RM=1,
# EVAL_K); with PARALLEL=1 in the background, logging to LOG, its pid kept
# for wait_all (a GPU has room for several tiny models).
pids=()
launch() {
	local log=$1
	shift
	if [ "$PARALLEL" = 1 ]; then
		env "$@" EVAL_K="$EVAL_K" GRPO_RM=1 bash "$here/run.sh" > "$log" 2>&1 &
		pids+=($!)
	else
		env "$@" EVAL_K="$EVAL_K" GRPO_RM=1 bash "$here/run.sh"
	fi
}
# wait_all WHAT: waits for the launched runs; any failure fails the check.
wait_all() {
	for p in "${pids[@]}"; do wait "$p" || { echo "$1" >&2; exit 1; }; done
	pids=()
}

# further S: seed S's RL runs 2 … RL_RUNS, from its cold start (in its world).
further() {
	local s=$1 r e world=()
	[ -d "$OUT/seed$s/world" ] && world=(WORLD="$OUT/seed$s/world")
	for r in $(seq 2 "$RL_RUNS"); do
		e=$OUT/seed$s-rl$r
		mkdir -p "$e"
		launch "$e.log" "${world[@]}" SEED="$s" RL_SEED=$(( 100 * s + r )) FROM_SFT="$OUT/seed$s" OUT="$e"
	done
}

if [ "$REUSE" != 1 ]; then
	for s in $SEEDS; do
		mkdir -p "$OUT/seed$s"
		launch "$OUT/seed$s.log" SEED="$s" OUT="$OUT/seed$s"
		[ "$PARALLEL" = 1 ] && [ "$RL_RUNS" -gt 1 ] || continue
		# Every run at once: the seed's further RL runs start as soon as its
		# own run begins RL (its sft/ and reader/ then exist), beside the
		# other seeds' cold starts, not after them.
		seed_pid=${pids[-1]}
		( pids=()
		  until grep -q "^== mempo iteration 1/" "$OUT/seed$s.log" 2>/dev/null; do
			kill -0 "$seed_pid" 2> /dev/null || exit 1   # it failed before RL
			sleep 2
		  done
		  further "$s"
		  wait_all "an RL run of seed $s failed: see $OUT/seed$s-rl*.log" ) &
		pids+=($!)
	done
	# One at a time: the further RL runs after every seed's own run.
	if [ "$PARALLEL" != 1 ]; then for s in $SEEDS; do further "$s"; done; fi
	wait_all "a run failed: see $OUT/seed*.log"
fi

# Pooled scores: evaluation (runs × k) and training rollouts per iteration.
args=() targs=()
for s in $SEEDS; do
	d=$OUT/seed$s
	for run in sft react; do
		for k in $EVAL_K; do args+=(--rollouts "$d/eval/$run-k$k.parquet" --label "$run"); done
	done
	for e in $(rl_dirs "$s"); do
		for run in mempo grpo; do
			for k in $EVAL_K; do args+=(--rollouts "$e/eval/$run-k$k.parquet" --label "$run"); done
		done
		for v in mempo grpo; do
			for f in "$e/$v"/rollouts-*.parquet; do
				i=${f##*/rollouts-} i=${i%.parquet}
				targs+=(--rollouts "$f" --label "$v-$i")
			done
		done
	done
done
"$BIN/mempo-score" "${args[@]}" --out "$OUT/pooled-scores.jsonl" > /dev/null
"$BIN/mempo-score" "${targs[@]}" --out "$OUT/pooled-train.jsonl" > /dev/null

# field FILE RUN K METRIC FIELD: one field of a score row ("nan" when absent).
field() {
	awk -v run="$2" -v k="$3" -v metric="$4" -v f="$5" '
		index($0, "\"run\":\"" run "\",") && index($0, "\"k\":" k ",") && index($0, "\"metric\":\"" metric "\",") {
			if (match($0, "\"" f "\":[^,}]*")) { print substr($0, RSTART + length(f) + 3, RLENGTH - length(f) - 3); found = 1 }
		}
		END { if (!found) print "nan" }' "$1"
}
# tfield FILE RUN METRIC: a training label's value pooled over its k (the RL
# tasks may mix objective counts, RL_K): the mean of the rows' values weighted
# by their trajectories ("nan" when absent).
tfield() {
	awk -v run="$2" -v metric="$3" '
		index($0, "\"run\":\"" run "\",") && index($0, "\"metric\":\"" metric "\",") &&
		match($0, "\"value\":[^,}]*") {
			v = substr($0, RSTART + 8, RLENGTH - 8)
			n = 1; if (match($0, "\"n\":[^,}]*")) n = substr($0, RSTART + 4, RLENGTH - 4)
			if (v != "NaN" && v != "null") { s += v * n; w += n }
		}
		END { if (w > 0) printf "%.17g\n", s / w; else print "nan" }' "$1"
}
ci() { printf '%.1f [%.1f, %.1f]' "$(field "$1" "$2" "$3" "$4" value)" "$(field "$1" "$2" "$3" "$4" ci_low)" "$(field "$1" "$2" "$3" "$4" ci_high)"; }
num() { [[ $1 =~ ^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$ ]]; }
gt() { num "$1" && num "$2" && awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 > b + 0) }'; }

# iterations: the RL iterations of the first seed, in numeric order.
iterations() { for f in "$OUT/seed${SEEDS%% *}/mempo"/rollouts-*.parquet; do i=${f##*/rollouts-}; echo "${i%.parquet}"; done | sort -n; }

fail=0
check() { # check DESCRIPTION A B: passes when A > B
	if gt "$2" "$3"; then echo "ok    $1 ($2 > $3)"; else echo "FAIL  $1 ($2 vs $3)"; fail=1; fi
}

# runs_table FILE METRIC: the metric of SFT, MemPO-RL, GRPO-RL and ReAct per
# k from a scores file, with 95% intervals, as a markdown table.
runs_table() {
	echo "| k | SFT | MemPO-RL | GRPO-RL | ReAct |"
	echo "|---:|---:|---:|---:|---:|"
	for k in $EVAL_K; do
		echo "| $k | $(ci "$1" sft "$k" "$2") | $(ci "$1" mempo "$k" "$2") | $(ci "$1" grpo "$k" "$2") | $(ci "$1" react "$k" "$2") |"
	done
}

# paired_row K: a markdown row from lines "MEMPO GRPO" (one a run): the runs
# where MemPO is ahead, the mean difference with a 95% t interval, min, max.
paired_row() {
	awk -v k="$1" '
		BEGIN { split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228 2.201 2.179 2.160 2.145 2.131 " \
			"2.120 2.110 2.101 2.093 2.086 2.080 2.074 2.069 2.064 2.060 2.056 2.052 2.048 2.045 2.042", t, " ") }
		$1 != "nan" && $2 != "nan" { d = $1 - $2; n++; s += d; ss += d * d; if (n == 1 || d < lo) lo = d; if (n == 1 || d > hi) hi = d; up += d > 0 }
		END {
			if (n == 0) { printf "| %s | - | - | - | - |\n", k; exit }
			m = s / n; half = "-"
			if (n > 1) { v = (ss - n * m * m) / (n - 1); if (v < 0) v = 0; q = n - 1 <= 30 ? t[n - 1] : 1.96
				half = sqrt(v / n) * q; printf "| %s | %d of %d | %+.1f [%+.1f, %+.1f] | %+.1f | %+.1f |\n", k, up, n, m, m - half, m + half, lo, hi }
			else printf "| %s | %d of %d | %+.1f | %+.1f | %+.1f |\n", k, up, n, m, lo, hi
		}'
}

P=$OUT/pooled-scores.jsonl T=$OUT/pooled-train.jsonl
{
	runs=""; [ "$RL_RUNS" -gt 1 ] && runs=", $RL_RUNS RL runs each"
	echo "## Pooled over seeds $SEEDS$runs (F1, 95% bootstrap interval)"
	echo
	runs_table "$P" f1
	echo
	echo "Loops, pooled the same way (% of test tasks where one step's whole output came three times in a row: a fact"
	echo "left out of the memory and searched for again; 95% bootstrap interval):"
	echo
	runs_table "$P" loops
	for s in $SEEDS; do
		echo
		echo "Seed $s (F1, 95% interval over its test tasks per k):"
		echo
		runs_table "$OUT/seed$s/scores.jsonl" f1
		if [ "$RL_RUNS" -gt 1 ]; then
			echo
			echo "Seed $s, every RL run (F1 of MemPO-RL / GRPO-RL; run 1 is the table above):"
			echo
			hdr="| k |" sep="|---:|" r=0
			for _ in $(rl_dirs "$s"); do r=$((r + 1)) hdr+=" run $r |" sep+="---:|"; done
			echo "$hdr"
			echo "$sep"
			for k in $EVAL_K; do
				printf '| %s |' "$k"
				for e in $(rl_dirs "$s"); do
					printf ' %.1f / %.1f |' "$(field "$e/scores.jsonl" mempo "$k" f1 value)" "$(field "$e/scores.jsonl" grpo "$k" f1 value)"
				done
				echo
			done
		fi
	done
	echo
	echo "MemPO-RL − GRPO-RL F1, run by run (each run against the GRPO run of the same cold start and RL seed): the runs"
	echo "where MemPO is ahead, the mean difference with a 95% t interval over the runs (the spread between cold starts and"
	echo "RL runs, which the pooled intervals above, over test tasks, leave out), and the smallest and largest:"
	echo
	echo "| k | MemPO ahead | mean [95% over runs] | min | max |"
	echo "|---:|---:|---:|---:|---:|"
	for k in $EVAL_K; do
		for s in $SEEDS; do
			for e in $(rl_dirs "$s"); do
				echo "$(field "$e/scores.jsonl" mempo "$k" f1 value) $(field "$e/scores.jsonl" grpo "$k" f1 value)"
			done
		done | paired_row "$k"
	done
	echo
	echo "Training rollouts per iteration, pooled over seeds (and over the k of the RL tasks): mean P(gold | q, mem) and mean R^M"
	echo
	echo "| iteration | MemPO P(gold\|mem) | GRPO P(gold\|mem) | MemPO R^M | GRPO R^M | MemPO turns | GRPO turns |"
	echo "|---:|---:|---:|---:|---:|---:|---:|"
	for i in $(iterations); do
		printf '| %s | %.4f | %.4f | %.4f | %.4f | %.2f | %.2f |\n' "$i" "$(tfield "$T" "mempo-$i" p_gold_mem)" "$(tfield "$T" "grpo-$i" p_gold_mem)" \
			"$(tfield "$T" "mempo-$i" r_mem)" "$(tfield "$T" "grpo-$i" r_mem)" \
			"$(tfield "$T" "mempo-$i" turns)" "$(tfield "$T" "grpo-$i" turns)"
	done
} | tee "$OUT/pooled.md"
echo

ks=($EVAL_K) k0=${ks[0]} kn=${ks[${#ks[@]} - 1]}
for k in $EVAL_K; do
	check "k=$k MemPO-RL F1 > SFT" "$(field "$P" mempo "$k" f1 value)" "$(field "$P" sft "$k" f1 value)"
	check "k=$k GRPO-RL F1 > SFT" "$(field "$P" grpo "$k" f1 value)" "$(field "$P" sft "$k" f1 value)"
done
for k in 4 8; do
	check "k=$k MemPO-RL F1 > GRPO-RL" "$(field "$P" mempo "$k" f1 value)" "$(field "$P" grpo "$k" f1 value)"
done
check "k=8 MemPO-RL's 95% interval above GRPO-RL's (low > high)" "$(field "$P" mempo 8 f1 ci_low)" "$(field "$P" grpo 8 f1 ci_high)"
iters=$(iterations)
first=$(echo "$iters" | head -n 1) last=$(echo "$iters" | tail -n 1)
rise() { awk -v a="$(tfield "$T" "$1-$last" p_gold_mem)" -v b="$(tfield "$T" "$1-$first" p_gold_mem)" 'BEGIN { if (a == "nan" || b == "nan") print "nan"; else printf "%.4f", a - b }'; }
check "MemPO's P(gold | mem) rises (iteration $last − $first)" "$(rise mempo)" 0
check "MemPO's P(gold | mem) rises more than GRPO's" "$(rise mempo)" "$(rise grpo)"
growth() { awk -v a="$(field "$P" "$1" "$kn" peak_tokens value)" -v b="$(field "$P" "$1" "$k0" peak_tokens value)" 'BEGIN { if (a == "nan" || b == "nan" || b == 0) print "nan"; else printf "%.2f", a / b }'; }
check "peak tokens k=$kn / k=$k0: ReAct's growth above MemPO's" "$(growth react)" "$(growth mempo)"

if [ "$fail" = 1 ]; then
	echo "demo-check FAILED: see the comparisons above" >&2
	exit 1
fi
echo "demo-check passed"
