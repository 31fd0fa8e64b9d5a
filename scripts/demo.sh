#!/usr/bin/env bash
# Retrieval demo: build an index over real HotpotQA paragraphs, serve it with
# mempo-serve, ask it questions with curl (the Search-R1 /retrieve contract),
# then stop the server with SIGTERM. Uses ../shared/data when present, else the
# committed sample in data/retrieval/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x bin/mempo-index ] || [ ! -x bin/mempo-serve ]; then
	mkdir -p bin && go build -o bin/ ./cmd/mempo-index ./cmd/mempo-serve
fi
work=$(mktemp -d)
server=""
cleanup() {
	if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then kill -TERM "$server"; wait "$server" || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

data=../shared/data/hotpotqa
if [ -f "$data/dev-with-paragraphs-a.jsonl" ]; then
	echo "== corpus: HotpotQA dev paragraphs from $data"
	bin/mempo-index corpus --from hotpotqa "$data"/dev-with-paragraphs-{a,b,c}.jsonl --out "$work/corpus.jsonl"
else
	echo "== corpus: data/retrieval/hotpotqa-dev-sample.jsonl (../shared/data not found)"
	cp data/retrieval/hotpotqa-dev-sample.jsonl "$work/corpus.jsonl"
fi

echo "== index"
bin/mempo-index --corpus "$work/corpus.jsonl" --out "$work/index"

echo "== serve"
bin/mempo-serve --index "$work/index" --addr 127.0.0.1:0 2> "$work/serve.log" &
server=$!
addr=""
for _ in $(seq 100); do
	addr=$(sed -n 's/.* on http:\/\/\([^ ]*\).*/\1/p' "$work/serve.log")
	[ -n "$addr" ] && break
	kill -0 "$server" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
	sleep 0.1
done
[ -n "$addr" ] || { echo "server did not start"; cat "$work/serve.log"; exit 1; }
cat "$work/serve.log"
curl -sf "http://$addr/health"; echo

# show prints one line per hit: id, title (the quoted first line of contents), score.
show() {
	grep -o '"id":"[^"]*","contents":"\\"[^\\]*\|"score":[-0-9.e+]*\|\],\[' | awk '
		function flush() { if (hit != "") print "  " hit; hit = "" }
		/^"id"/ { flush(); split($0, a, "\""); t = $0; sub(/^"id":"[^"]*","contents":"\\"/, "", t); hit = sprintf("id %-6s %s", a[4], t) }
		/^"score"/ { sub(/^"score":/, ""); hit = hit "  (score " $0 ")" }
		/^\],\[/ { flush(); print "  --" }
		END { flush() }'
}
echo "== POST /retrieve (topk 3, return_scores true): raw answer, then one line per hit"
curl -sf "http://$addr/retrieve" -H 'Content-Type: application/json' -d '{
  "queries": ["Alexander Kerensky was defeated by the Bolsheviks in a civil war that ended when?",
              "Where was the music festival Billy McFarland was charged with wire fraud for supposed to take place?"],
  "topk": 3, "return_scores": true}' > "$work/answer.json"
head -c 120 "$work/answer.json"; echo " ..."
show < "$work/answer.json"
echo "== POST /retrieve (return_scores false, 3 queries, server default topk)"
curl -sf "http://$addr/retrieve" -d '{"queries": ["Poleconomy board game", "Hey Pa goat roof", "Fyre Festival"], "return_scores": false}' | show
echo "== bad request → 400"
curl -s -o /dev/stderr -w 'HTTP %{http_code}\n' "http://$addr/retrieve" -d '{"queries": "not a list"}' 2>&1
echo "== /metrics (excerpt)"
curl -sf "http://$addr/metrics" | grep -E '^mempo_(retrieve_requests_total|retrieve_queries_total|queue_depth)'

echo "== stop (SIGTERM)"
kill -TERM "$server"
wait "$server"
server=""
tail -1 "$work/serve.log"
