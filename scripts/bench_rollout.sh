#!/usr/bin/env bash
# Rollout on the CPU, end to end through the command: a random-weight tiny
# Qwen2 (the "tiny" preset, real Qwen tokenizer), BM25 over the HotpotQA dev-a
# paragraphs, G = 16 on the first TASKS tasks. Prints mempo-rollout's summary
# line (trajectories/s, generated tokens/s, turns per trajectory, share of
# wall time waiting for retrieval) and the Go benchmarks of lib/rollout, whose
# reference is a bare Model.Generate measured in the same run.
#
#   bash scripts/bench_rollout.sh [TASKS] [WORKDIR]
#
# Needs ../shared/data/hotpotqa and testdata/qwen3/tokenizer.json (make
# fixtures-tokenizer, or QWEN_TOKENIZER=path).
set -euo pipefail
cd "$(dirname "$0")/.."
TASKS=${1:-2}
WORK=${2:-}
DATA=../shared/data/hotpotqa
TOK=${QWEN_TOKENIZER:-testdata/qwen3/tokenizer.json}
[ -f "$DATA/dev-with-paragraphs-a.jsonl" ] || { echo "needs $DATA (the shared QA data; see README.md, set-up)" >&2; exit 1; }
[ -f "$TOK" ] || { echo "needs the Qwen tokenizer at $TOK (make fixtures-tokenizer)" >&2; exit 1; }
if [ -z "$WORK" ]; then WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT; fi
mkdir -p "$WORK" bin
go build -o bin/ ./cmd/mempo-index ./cmd/mempo-rollout ./cmd/mempo-update

bin/mempo-index corpus --from hotpotqa "$DATA/dev-with-paragraphs-a.jsonl" --out "$WORK/corpus.jsonl"
bin/mempo-index --corpus "$WORK/corpus.jsonl" --out "$WORK/index"
bin/mempo-rollout tasks --from hotpotqa --k 1 --out "$WORK/tasks.jsonl" "$DATA/dev-with-paragraphs-a.jsonl"
bin/mempo-update init --config tiny --tokenizer "$TOK" --out "$WORK/tiny" --seed 1 --force
echo "== mempo-rollout, G = 16, $TASKS tasks"
bin/mempo-rollout --model "$WORK/tiny" --tasks "$WORK/tasks.jsonl" --index "$WORK/index" --group 16 --limit "$TASKS" \
  --max-turns 3 --max-step-tokens 24 --on-invalid correct --out "$WORK/rollouts.parquet"
echo "== go benchmarks"
go test -run '^$' -bench Rollout -benchtime 1x ./lib/rollout
