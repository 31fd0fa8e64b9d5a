#!/usr/bin/env python3
"""Encode throughput of Hugging Face `tokenizers` on the text BenchmarkEncode uses.

Reads only testdata files: the texts of testdata/tokenizer/qwen3-golden.jsonl (2,147 strings:
real questions, answers and passages plus edge cases) and the Qwen3 tokenizer at
testdata/qwen3/tokenizer.json (make fixtures-tokenizer). Run from the repository root:

    python3 scripts/bench_tokenizer.py [--seconds 5]

It prints MB/s (bytes of UTF-8 text per second) for
  - encode, one string at a time on one thread: what lib/tokenizer's BenchmarkEncode measures
    (wall clock, and per CPU-second of this process);
  - encode_batch over all strings, which HF parallelizes over every core (for reference).
Both warm the tokenizer's BPE cache with one untimed pass first, as the Go benchmark does.

The Go side on the same machine (the test binary needs no Go toolchain there):
    go test -c -o bin/tokenizer.test ./lib/tokenizer          # on the build machine
    cd lib/tokenizer && ../../bin/tokenizer.test -test.run '^$' -test.bench 'Encode$' -test.benchtime 5s
"""
import argparse, json, os, sys, time

import tokenizers
from tokenizers import Tokenizer

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="minimum timed seconds per measurement")
    args = ap.parse_args()

    tok_path = os.path.join(root, "testdata", "qwen3", "tokenizer.json")
    if not os.path.exists(tok_path):
        sys.exit("%s is absent: run make fixtures-tokenizer" % tok_path)
    with open(os.path.join(root, "testdata", "tokenizer", "qwen3-golden.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(l) for l in f if l.strip()]
    texts = [r["text"] for r in rows]
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    tok = Tokenizer.from_file(tok_path)

    # Sanity: the ids are the golden ones, so both sides do the same work.
    bad = sum(tok.encode(t, add_special_tokens=False).ids != r["ids"] for t, r in zip(texts, rows))
    if bad:
        sys.exit("%d golden strings encode differently: not the tokenizer the goldens were made with" % bad)

    def single():
        for t in texts:
            tok.encode(t, add_special_tokens=False)

    def batch():
        tok.encode_batch(texts, add_special_tokens=False)

    print("tokenizers %s, %d strings, %.1f KB per pass, %d CPUs" % (
        tokenizers.__version__, len(texts), nbytes / 1e3, os.cpu_count()))
    for name, fn in [("encode (1 thread)", single), ("encode_batch (all threads)", batch)]:
        fn()  # warm the BPE cache
        passes, w0, c0 = 0, time.perf_counter(), time.process_time()
        while True:
            fn()
            passes += 1
            wall = time.perf_counter() - w0
            if wall >= args.seconds:
                break
        cpu = time.process_time() - c0
        print("%-28s %8.2f MB/s wall   %8.2f MB/cpu-s   (%d passes in %.1f s)" % (
            name, nbytes * passes / wall / 1e6, nbytes * passes / cpu / 1e6, passes, wall))


if __name__ == "__main__":
    main()
