#!/usr/bin/env bash
# Does a reader trained two epochs (SCORE_READER=2, both kinds of rows) read
# the middle objectives of an eight-entry memory better than the preset's
# one-epoch reader? scripts/memscore copy on the same rows: the turn-layout
# scoring sequences of seed 6's SFT greedy rollouts at k = 8 (128 tasks; cold
# start of ../2026-12-07-demo-new-preset-cpu/seeds6-7, E=/tmp/fresh67), scored
# by its reader/ (one epoch) and by the two-epoch reader this folder's run
# 6:602 trained from the same SFT model (R=/tmp/reader2).
cd "$(dirname "$0")/../../../.."
export OPENBLAS_NUM_THREADS=1 OPENBLAS_CORETYPE=Zen
BIN=${BIN:-$PWD/.work/mempool8/bin} E=${E:-/tmp/fresh67} R=${R:-/tmp/reader2} T=$(mktemp -d)
go build -o $T/memscore ./scripts/memscore
$T/memscore seqs $E/seed6/eval/sft-k8.parquet $E/seed6/sft/tokenizer.json |
	python3 -c 'import json,sys; [sys.stdout.write(l) for l in sys.stdin if json.loads(l)["ctx"] == "turn"]' > $T/turn.jsonl
for r in "one-epoch $E/seed6/reader" "two-epoch $R/seed6-602/reader"; do set -- $r
	$BIN/mempo-score logprobs --model $2 --in $T/turn.jsonl --out $T/lp-$1.jsonl --device cpu > /dev/null
	echo "## $1 reader ($2)"; $T/memscore copy $T/lp-$1.jsonl $E/seed6/sft/tokenizer.json; echo
done
rm -rf $T
