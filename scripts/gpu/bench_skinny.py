#!/usr/bin/env python3
"""PyTorch on the products TestCUDASkinnyBenchmarks times (lib/model/cuda_decode_bench_test.go): a decoding step's
rows (8 to 64) by a Qwen2.5-0.5B or 7B weight matrix, bf16 operands, with q, k and v merged into one weight and gate
and up into one, as vLLM and SGLang store them. Two ways a PyTorch user would write it: F.linear (bf16 out, cuBLAS or
cuBLASLt as PyTorch picks) and, where this PyTorch has it, torch.mm with out_dtype=float32 (fp32 out, as mempo's step
writes). Each product repeated over enough copies of the weights that none is read from L2; CUDA events around 48
launches after 4 warm-ups; the floor is the weight bytes over the measured device-to-device copy rate (bytes read +
written), as in the Go benchmark.
    usage: python3 scripts/gpu/bench_skinny.py
"""
import torch
import torch.nn.functional as F


def timed(fn, reps=48):
    for _ in range(4):
        fn(0)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for i in range(reps):
        fn(i)
    e1.record()
    torch.cuda.synchronize()
    return 1e3 * e0.elapsed_time(e1) / reps


def main():
    dev = torch.device("cuda")
    n = 1 << 28
    a, b = torch.empty(n, dtype=torch.float32, device=dev), torch.empty(n, dtype=torch.float32, device=dev)
    a.fill_(1)
    ts = []
    for _ in range(21):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        b.copy_(a)
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1))
    ts = sorted(ts[1:])
    bw = 2 * 4 * n / (ts[len(ts) // 2] / 1e3)
    del a, b
    print(f"TORCH device {torch.cuda.get_device_name()}, torch {torch.__version__}, copy bandwidth {bw / 1e12:.2f} TB/s")
    has_out_dtype = True
    for model, H, I, Q, KV, V in (("qwen2.5-0.5b", 896, 4864, 896, 128, 151936), ("qwen2.5-7b", 3584, 18944, 3584, 512, 152064)):
        for name, N, K in (("qkv", Q + 2 * KV, H), ("o", H, Q), ("gate+up", 2 * I, H), ("down", H, I), ("head", V, H)):
            nbytes = 2 * N * K
            copies = min(16, max(1, (400 << 20) // nbytes + 1))
            ws = [torch.randn(N, K, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(copies)]
            floor = nbytes / bw * 1e6
            for m in (8, 16, 32, 64):
                x = torch.randn(m, K, device=dev, dtype=torch.bfloat16)
                lin = timed(lambda i: F.linear(x, ws[i % copies]))
                line = f"TORCH skinny {model} {name:<7} {N:6d}×{K:<5d} m={m:2d}: F.linear bf16 out {lin:8.2f} µs ({100 * floor / lin:5.1f}% of the floor {floor:.2f} µs)"
                if has_out_dtype:
                    try:
                        mm = timed(lambda i: torch.mm(x, ws[i % copies].t(), out_dtype=torch.float32))
                        line += f"; mm out_dtype=float32 {mm:8.2f} µs ({100 * floor / mm:5.1f}%)"
                    except (TypeError, RuntimeError) as e:
                        has_out_dtype = False
                        line += f"; mm out_dtype=float32: {type(e).__name__}"
                print(line, flush=True)
            del ws
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
