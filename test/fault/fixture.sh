#!/usr/bin/env bash
# The fault table's shared fixture, made with the commands under test:
# a short demo run (world index, init/SFT/RL checkpoints, rollouts, scores)
# and a BM25 index over the HotpotQA sample for the server cases.
set -euo pipefail
FIX=$1
BIN=${BIN:?BIN: the directory of the commands}
mkdir -p "$FIX"
OUT=$FIX/demo SHORT=1 DEVICE=cpu BIN=$BIN bash scripts/demo/run.sh >"$FIX/demo.log" 2>&1
# The HotpotQA dev paragraphs of the shared data (10,787 passages, the index
# of docs/BENCHMARKS.md) when present, else the committed 593-passage sample.
hp=../shared/data/hotpotqa
if [ -f "$hp/dev-with-paragraphs-a.jsonl" ]; then
	"$BIN/mempo-index" corpus --from hotpotqa "$hp"/dev-with-paragraphs-{a,b,c}.jsonl --out "$FIX/hotpot-corpus.jsonl" 2>>"$FIX/demo.log"
	cat "$hp"/dev-with-paragraphs-{a,b,c}.jsonl > "$FIX/hotpot-questions.jsonl"
else
	cp data/retrieval/hotpotqa-dev-sample.jsonl "$FIX/hotpot-corpus.jsonl"
	cp data/retrieval/hotpotqa-dev-sample.jsonl "$FIX/hotpot-questions.jsonl"
fi
"$BIN/mempo-index" --corpus "$FIX/hotpot-corpus.jsonl" --out "$FIX/hotpot-index" 2>>"$FIX/demo.log"
cp -r data/world "$FIX/world"
