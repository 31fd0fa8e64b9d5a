#!/usr/bin/env bash
# The MemPO rollout benchmark, end to end through the commands: mempo-serve
# (BM25 over the HotpotQA dev-a paragraphs, over HTTP), mempo-rollout with G
# trajectories per task, R^M on, and a policy that searches: a random-weight
# Qwen2 of CONFIG's shape whose first FORCE steps are forced searches
# (--force-search-turns: the sampled text is the memory, the query the
# question and its first words). Each MODE is one run of the same workload:
# overlap (the turn's searches run while the tasks that ended get their
# memory rewards; the default), unshared (--no-shared-prefixes: every
# memory-reward sequence run from its first id), whole-prefill
# (--no-shared-prefill: every prompt of a turn prefilled from its first id),
# mem16k (--mem-tokens-per-call 16384: the memory-reward forwards at the
# size they had before it followed the free memory) and sync
# (--sync-retrieval). mempo-rollout's
# summary line gives trajectories/s, generated tokens/s and the shares of
# wall time in generation, retrieval wait, R^M and host work.
#
#   bash scripts/bench_rollout.sh [TASKS] [WORKDIR]
#
# Defaults are a CPU smoke run (tiny preset, 2 tasks, 3 turns). The issue's
# shape on a GPU: CONFIG=qwen2.5-0.5b DEVICE=cuda-bf16 G=16 TURNS=8 FORCE=7
# BATCH=1024 bash scripts/bench_rollout.sh 64. Environment: CONFIG, DEVICE
# (cpu), G (16), TURNS (3), FORCE (TURNS-1), STEP (max step tokens, 24), OBS
# (observation tokens, 256), ON_INVALID (end: a step after the forced ones that
# breaks the format ends the trajectory, so tasks end at different turns), BATCH (trajectories in flight, G·TASKS), MODES
# ("overlap sync"), TIMEOUT (seconds per run, 0: none), BIN (prebuilt
# binaries: skips go build; the GPU machine has no Go), INDEX (a prebuilt
# index of the paragraphs), EXTRA (more mempo-rollout flags, e.g. "--kv-gib 1"),
# GO_BENCH=1 (also lib/rollout's Go benchmarks).
#
# Needs ../shared/data/hotpotqa and testdata/qwen3/tokenizer.json (make
# fixtures-tokenizer, or QWEN_TOKENIZER=path).
set -euo pipefail
cd "$(dirname "$0")/.."
TASKS=${1:-2}
WORK=${2:-}
DATA=${DATA:-../shared/data/hotpotqa}
TOK=${QWEN_TOKENIZER:-testdata/qwen3/tokenizer.json}
CONFIG=${CONFIG:-tiny} DEVICE=${DEVICE:-cpu} G=${G:-16} TURNS=${TURNS:-3}
FORCE=${FORCE:-$((TURNS - 1))} STEP=${STEP:-24} OBS=${OBS:-256} BATCH=${BATCH:-$((G * TASKS))}
MODES=${MODES:-overlap sync} TIMEOUT=${TIMEOUT:-0}
[ -f "$DATA/dev-with-paragraphs-a.jsonl" ] || { echo "needs $DATA (the shared QA data; see README.md, set-up)" >&2; exit 1; }
[ -f "$TOK" ] || { echo "needs the Qwen tokenizer at $TOK (make fixtures-tokenizer)" >&2; exit 1; }
TMPWORK=
if [ -z "$WORK" ]; then WORK=$(mktemp -d); TMPWORK=$WORK; trap 'rm -rf "$TMPWORK"' EXIT; fi
mkdir -p "$WORK"
if [ -z "${BIN:-}" ]; then
	BIN=bin
	mkdir -p bin
	go build -o bin/ ./cmd/mempo-index ./cmd/mempo-serve ./cmd/mempo-rollout ./cmd/mempo-update
fi

INDEX=${INDEX:-}
if [ -z "$INDEX" ]; then
	"$BIN/mempo-index" corpus --from hotpotqa "$DATA/dev-with-paragraphs-a.jsonl" --out "$WORK/corpus.jsonl"
	"$BIN/mempo-index" --corpus "$WORK/corpus.jsonl" --out "$WORK/index"
	INDEX=$WORK/index
fi
"$BIN/mempo-rollout" tasks --from hotpotqa --k 1 --out "$WORK/tasks.jsonl" "$DATA/dev-with-paragraphs-a.jsonl"
# A WORKDIR of an earlier run of the same CONFIG keeps its random policy.
if ! grep -qs "\"$CONFIG\"" "$WORK/policy.config"; then
	/usr/bin/time -f "init: wall %e s" "$BIN/mempo-update" init --config "$CONFIG" --tokenizer "$TOK" --out "$WORK/policy" --seed 1 --force
	echo "\"$CONFIG\"" >"$WORK/policy.config"
fi

PORT=${PORT:-$((20000 + RANDOM % 20000))}
"$BIN/mempo-serve" --index "$INDEX" --addr "127.0.0.1:$PORT" >"$WORK/serve.log" 2>&1 &
SERVE=$!
trap 'kill $SERVE 2>/dev/null || true; [ -z "$TMPWORK" ] || rm -rf "$TMPWORK"' EXIT
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
	sleep 0.1
done

for mode in $MODES; do
	read -r -a extra <<<"${EXTRA:-}"
	[ "$mode" = sync ] && extra+=(--sync-retrieval)
	[ "$mode" = unshared ] && extra+=(--no-shared-prefixes)
	[ "$mode" = whole-prefill ] && extra+=(--no-shared-prefill)
	[ "$mode" = mem16k ] && extra+=(--mem-tokens-per-call 16384)
	echo "== mempo-rollout $mode: $CONFIG on $DEVICE, G = $G, $TASKS tasks, up to $TURNS turns ($FORCE forced searches), step $STEP tokens, batch $BATCH"
	to=()
	[ "$TIMEOUT" != 0 ] && to=(timeout "$TIMEOUT")
	"${to[@]}" "$BIN/mempo-rollout" --model "$WORK/policy" --tokenizer "$TOK" --device "$DEVICE" --tasks "$WORK/tasks.jsonl" \
		--retriever "http://127.0.0.1:$PORT" --group "$G" --limit "$TASKS" --batch "$BATCH" --max-turns "$TURNS" \
		--force-search-turns "$FORCE" --max-step-tokens "$STEP" --obs-tokens "$OBS" --on-invalid "${ON_INVALID:-end}" \
		--out "$WORK/rollouts-$mode.parquet" --overwrite "${extra[@]}" || echo "== $mode run failed or timed out: exit $?"
	rm -rf "$WORK/rollouts-$mode.parquet.partial"
done
if [ -n "${GO_BENCH:-}" ]; then
	echo "== go benchmarks"
	go test -run '^$' -bench Rollout -benchtime 1x ./lib/rollout
fi
