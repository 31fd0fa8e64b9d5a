#!/usr/bin/python3
"""Writes the FAISS fixture mempo's Go tests read (testdata/retrieval/faiss/).

Run with Debian's python3-faiss and python3-numpy (1.7.3 / 1.24):
    /usr/bin/python3 scripts/make_faiss_fixture.py

It makes deterministic unit-norm vectors, builds an inner-product Flat and an
HNSW32 index with faiss.index_factory exactly as Search-R1's index_builder.py
does, writes them with faiss.write_index, and records the top-k ids and scores
Python faiss returns for fixed queries. The Go tests read the same index files
and must return the same results. A matching synthetic corpus (one passage per
vector, wiki-18 layout) lets `mempo-index --faiss-read` adopt the Flat index.
"""
import json
import os

import faiss
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "retrieval", "faiss")
N, D, NQ, K = 500, 32, 16, 10
EF_SEARCH = 64


def unit(x):
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20260130)
    base = unit(rng.standard_normal((N, D)))
    queries = unit(rng.standard_normal((NQ, D)))
    np.save(os.path.join(OUT, "base.npy"), base)
    np.save(os.path.join(OUT, "queries.npy"), queries)

    expected = {"n": N, "d": D, "k": K, "faiss_version": faiss.__version__}
    for name, spec in (("flat", "Flat"), ("hnsw32", "HNSW32")):
        index = faiss.index_factory(D, spec, faiss.METRIC_INNER_PRODUCT)
        index.add(base)
        if spec.startswith("HNSW"):
            index.hnsw.efSearch = EF_SEARCH
        faiss.write_index(index, os.path.join(OUT, name + ".index"))
        scores, ids = index.search(queries, K)
        expected[name] = {"factory": spec, "ids": ids.tolist(), "scores": [[float(s) for s in row] for row in scores]}
    expected["hnsw32"]["efSearch"] = EF_SEARCH

    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    with open(os.path.join(OUT, "corpus.jsonl"), "w") as f:
        for i in range(N):
            f.write(json.dumps({"id": str(i), "contents": '"Vector %d"\nsynthetic passage number %d' % (i, i)}) + "\n")


if __name__ == "__main__":
    main()
