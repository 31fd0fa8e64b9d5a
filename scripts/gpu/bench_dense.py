#!/usr/bin/env python3
"""PyTorch reference for the GPU dense-search benchmark (lib/retrieval's TestCUDADenseBenchmarks, docs/BENCHMARKS.md,
"Dense retrieval on the H200"): exact inner-product top-k over N synthetic 768-d fp16 unit vectors made on the device,
queries in batches of 1, 64 and 512, each search one call as mempo-serve --gpu-search does one: the fp32 queries go
to the device and to fp16, scores = q @ X.T (cuBLAS fp16, fp32 accumulation), torch.topk, results back to the host.
The scores of a batch are made a slice of X at a time (at most 4 GB of fp16 scores), the slices' top-k merged.

Usage: python3 scripts/gpu/bench_dense.py [--sizes 1000000,21000000] [--batches 1,64,512] [--k 10] [--dim 768]
Prints one line per (size, batch) starting with "BENCH dense_torch ".
"""
import argparse, json, time
import torch

ap = argparse.ArgumentParser()
ap.add_argument("--sizes", default="1000000,21000000")
ap.add_argument("--batches", default="1,64,512")
ap.add_argument("--k", type=int, default=10)
ap.add_argument("--dim", type=int, default=768)
ap.add_argument("--seconds", type=float, default=1.0)
a = ap.parse_args()
dev = "cuda"
torch.manual_seed(0)
batches = [int(b) for b in a.batches.split(",")]
queries = torch.nn.functional.normalize(torch.randn(max(batches), a.dim), dim=-1).numpy()

def search(X, q_host, k):
    q = torch.from_numpy(q_host).to(dev, non_blocking=False).half()
    n = X.shape[0]
    step = max(1 << 16, min(n, (4 << 30) // (2 * q.shape[0])))
    best_s, best_i = None, None
    for lo in range(0, n, step):
        s = q @ X[lo:lo + step].T
        v, i = torch.topk(s, min(k, s.shape[1]), dim=1)
        i = i + lo
        if best_s is None:
            best_s, best_i = v, i
        else:
            v2, j = torch.topk(torch.cat([best_s, v], 1), k, dim=1)
            best_i = torch.gather(torch.cat([best_i, i], 1), 1, j)
            best_s = v2
    return best_s.float().cpu(), best_i.cpu()

print(f"BENCH dense_torch_env torch {torch.__version__} {torch.cuda.get_device_name()}", flush=True)
for n in [int(s) for s in a.sizes.split(",")]:
    t0 = time.perf_counter()
    X = torch.empty(n, a.dim, dtype=torch.float16, device=dev)
    chunk = 1 << 20
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        X[lo:hi] = torch.nn.functional.normalize(torch.randn(hi - lo, a.dim, device=dev), dim=-1).half()
    torch.cuda.synchronize()
    made = time.perf_counter() - t0
    for b in batches:
        q = queries[:b]
        search(X, q, a.k)  # warm-up
        iters = 0
        t0 = time.perf_counter()
        while iters < 3 or time.perf_counter() - t0 < a.seconds:
            search(X, q, a.k)
            iters += 1
        secs = time.perf_counter() - t0
        print("BENCH dense_torch " + json.dumps({"n": n, "dim": a.dim, "k": a.k, "batch": b, "qps": round(b * iters / secs, 1),
                                                 "ms_per_batch": round(1000 * secs / iters, 3), "made_s": round(made, 2)}), flush=True)
    del X
    torch.cuda.empty_cache()
