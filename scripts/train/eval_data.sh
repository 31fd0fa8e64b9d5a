#!/usr/bin/env bash
# Evaluation tasks of the QA benchmarks from the shared QA files, as the
# paper's evaluation reads them: every benchmark at k = 1 (the Search-R1
# suite), and the multi-objective sets: NQ and HotpotQA at k = 2, HotpotQA at
# k = 4 and 8 (k consecutive questions of one source joined with "; ", MEM1's
# recipe, lib/tasks). `make eval-data` writes them to runs/eval-data/.
#
#   bash scripts/train/eval_data.sh OUTDIR        (BIN, SHARED, EVAL_K from the environment)
#
# What ../shared/data holds, and so what is written (OUTDIR/NAME-kK.parquet):
#   nq        nq/test-1000.jsonl, the first 500 questions (the other 500 are
#             make train's stand-in NQ training questions)          k = 1, 2
#   triviaqa  triviaqa/test-1000.jsonl (a 1,000-question test sample) k = 1
#   popqa     popqa/test-1000.jsonl (a 1,000-question sample)         k = 1
#   hotpotqa  hotpotqa/dev-questions-full.jsonl (all 7,405 dev questions,
#             Search-R1 row layout)                                   k = 1, 2, 4, 8
#   musique   musique/train-with-paragraphs.json: 100 TRAIN questions (no
#             MuSiQue dev set is here; scores on them are not the benchmark's) k = 1
# Not written: 2WikiMultihopQA (only its passage corpus, 2wikimultihopqa/corpus.json,
# is here, no questions) and Bamboogle (absent). Point EVAL at their files
# (FlashRAG JSONL or Search-R1 parquet, through mempo-rollout tasks) where you
# have them.
set -euo pipefail
out=${1:?usage: eval_data.sh OUTDIR}
BIN=${BIN:-bin}
SHARED=${SHARED:-../shared/data}
EVAL_K=${EVAL_K:-"1 2 4 8"}
[ -d "$SHARED" ] || { echo "eval_data: SHARED=$SHARED: no such directory" >&2; exit 1; }
mkdir -p "$out/src/nq"
head -n 500 "$SHARED/nq/test-1000.jsonl" > "$out/src/nq/test-1-500.jsonl"

# name file k-list
sets=(
	"nq $out/src/nq/test-1-500.jsonl 1 2"
	"triviaqa $SHARED/triviaqa/test-1000.jsonl 1"
	"popqa $SHARED/popqa/test-1000.jsonl 1"
	"hotpotqa $SHARED/hotpotqa/dev-questions-full.jsonl 1 2 4 8"
	"musique $SHARED/musique/train-with-paragraphs.json 1"
)
for s in "${sets[@]}"; do
	read -r name file ks <<< "$s"
	for k in $ks; do
		case " $EVAL_K " in *" $k "*) ;; *) continue ;; esac
		"$BIN/mempo-rollout" tasks --k "$k" --source "$name" --out "$out/$name-k$k.parquet" "$file"
	done
done
printf 'written %s\n' "$(date -u +%FT%TZ)" > "$out/.done.tmp" && mv -f "$out/.done.tmp" "$out/.done"
