#!/usr/bin/env bash
# Retrieval at scale: a corpus of N passages (default 1,000,000) made by
# repeating and perturbing the real passages in ../shared/data, indexed by
# mempo-index under /usr/bin/time (peak RSS), then BM25 queries/s and latency
# at concurrency 1/16/64 (in process and over HTTP) and FAISS Flat 1M×768 vs an
# OpenBLAS sgemm brute force.
#
#   bash scripts/bench_retrieval_1m.sh [N] [WORKDIR]      (SKIP_FAISS=1: BM25 only)
#
# Needs ../shared/data (HotpotQA, wiki18, 2Wiki, MuSiQue) and about 3 GiB of
# disk in WORKDIR (default: a temporary directory, removed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
WORK=${2:-}
DATA=../shared/data
[ -d "$DATA/hotpotqa" ] || { echo "needs $DATA (the shared QA data; see README.md, set-up)" >&2; exit 1; }
if [ -z "$WORK" ]; then WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT; fi
mkdir -p "$WORK" bin
go build -o bin/ ./cmd/mempo-index ./cmd/mempo-serve
go build -o "$WORK/synthcorpus" ./scripts/synthcorpus

echo "== sources"
bin/mempo-index corpus --from hotpotqa $DATA/hotpotqa/dev-with-paragraphs-{a,b,c}.jsonl $DATA/hotpotqa/train-with-paragraphs.jsonl --out "$WORK/hotpot.jsonl"
bin/mempo-index corpus --from 2wiki $DATA/2wikimultihopqa/corpus.json --out "$WORK/2wiki.jsonl"
bin/mempo-index corpus --from musique $DATA/musique/train-corpus.json --out "$WORK/musique.jsonl"
echo "== synthesize $N passages"
"$WORK/synthcorpus" --n "$N" --out "$WORK/big.jsonl" "$WORK/hotpot.jsonl" "$WORK/2wiki.jsonl" "$WORK/musique.jsonl" $DATA/wiki18/wiki18-first-1000.jsonl
ls -la "$WORK/big.jsonl"
echo "== build (peak RSS by /usr/bin/time)"
/usr/bin/time -f "wall %e s, user %U s, system %S s, peak RSS %M KiB" bin/mempo-index --corpus "$WORK/big.jsonl" --out "$WORK/index"
du -sh "$WORK/index"; ls -la "$WORK/index"
echo "== BM25 search"
MEMPO_BENCH_INDEX="$WORK/index" go test -run '^$' -bench 'LargeBM25' -benchtime 1x ./lib/retrieval/
[ -n "${SKIP_FAISS:-}" ] && exit 0
echo "== FAISS Flat vs sgemm, 1M x 768 (SKIP_FAISS=1 skips)"
MEMPO_BENCH_FAISS_N=1000000 go test -run '^$' -bench 'FlatSearch' -benchtime 1x -timeout 30m ./lib/faiss/
