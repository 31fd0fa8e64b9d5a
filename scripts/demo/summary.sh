#!/usr/bin/env bash
# summary.sh OUT "KS": the demo's table from OUT/scores.jsonl (mempo-score's
# long form, one JSON object per line), with awk only, so it runs on a fresh
# machine without jq or Python.
set -euo pipefail
OUT=$1
KS=${2:-"2 4 8"}
SC=$OUT/scores.jsonl

# val RUN K METRIC: the value of one score row ("-" when absent).
val() {
	awk -v run="$1" -v k="$2" -v metric="$3" '
		index($0, "\"run\":\"" run "\",") && index($0, "\"k\":" k ",") && index($0, "\"metric\":\"" metric "\",") {
			match($0, /"value":[^,}]*/); v = substr($0, RSTART + 8, RLENGTH - 8); found = 1
		}
		END { if (found) printf "%s", v; else printf "-" }' "$SC"
}
fmt() { [ "$1" = - ] && printf -- - || LC_ALL=C printf "%.${2:-1}f" "$1"; }

echo "## MemPO demo ($(basename "$OUT"))"
echo
echo "Held-out people, greedy decoding, one trajectory per task. success = all k answers exact (R^T), F1 = mean over objectives (×100)."
echo
echo "| k | SFT success | SFT F1 | MemPO-RL success | MemPO-RL F1 | GRPO-RL success | GRPO-RL F1 | ReAct success | ReAct F1 |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for k in $KS; do
	row="| $k"
	for run in sft mempo grpo react; do
		row="$row | $(fmt "$(val "$run" "$k" all_correct)") | $(fmt "$(val "$run" "$k" f1)")"
	done
	echo "$row |"
done
echo
k0=$(echo "$KS" | awk '{print $1}')
echo "Memory (k = $k0): mean R^M = P(gold | q, mem) − P(gold | q, history) over <mem> blocks, and mean P(gold | q, mem)."
echo
echo "| model | mean R^M | mean P(gold \| mem) |"
echo "|---|---:|---:|"
echo "| SFT (before RL) | $(fmt "$(val sft "$k0" r_mem)" 4) | $(fmt "$(val sft "$k0" p_gold_mem)" 4) |"
echo "| MemPO-RL (after) | $(fmt "$(val mempo "$k0" r_mem)" 4) | $(fmt "$(val mempo "$k0" p_gold_mem)" 4) |"
echo
loops=0
for k in $KS; do
	for run in sft mempo grpo react; do
		v=$(val "$run" "$k" loops)
		[ "$v" != - ] && awk -v v="$v" 'BEGIN { exit !(v > 0) }' && loops=1
	done
done
if [ "$loops" = 1 ]; then
	echo "Loops: share of test tasks (%) where the agent repeated one step's whole output three times in a row (under keep 1"
	echo "the same memory and search give the same context again, so a greedy policy repeats it to the turn limit: in this"
	echo "world the mark of a fact found, left out of the memory, and searched for again)."
	echo
	echo "| k | SFT | MemPO-RL | GRPO-RL | ReAct |"
	echo "|---:|---:|---:|---:|---:|"
	for k in $KS; do
		echo "| $k | $(fmt "$(val sft "$k" loops)") | $(fmt "$(val mempo "$k" loops)") | $(fmt "$(val grpo "$k" loops)") | $(fmt "$(val react "$k" loops)") |"
	done
else
	echo "Loops (one step's whole output three times in a row: a fact left out of the memory and searched for again): none."
fi
echo
echo "Peak tokens per step (max over steps of context + output, world-tokenizer ids), mean over tasks: the trained"
echo "models, and the scripted expert following the protocol perfectly under each context."
echo
echo "| k | MemPO-RL (keep 1) | ReAct (keep all) | expert, keep 1 | expert, keep all | keep all / keep 1 (expert) |"
echo "|---:|---:|---:|---:|---:|---:|"
for k in $KS; do
	m=$(val mempo "$k" peak_tokens) r=$(val react "$k" peak_tokens)
	e1=$(val expert "$k" peak_tokens) ea=$(val expert-react "$k" peak_tokens)
	ratio=-
	[ "$e1" != - ] && [ "$ea" != - ] && ratio=$(awk -v a="$ea" -v b="$e1" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "-" }')
	echo "| $k | $(fmt "$m" 0) | $(fmt "$r" 0) | $(fmt "$e1" 0) | $(fmt "$ea" 0) | $ratio |"
done
