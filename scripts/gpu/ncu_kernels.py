#!/usr/bin/env python3
"""Per-kernel table of an ncu CSV (ncu --csv --metrics gpu__time_duration.sum[,dram__bytes_read.sum]): for each
kernel name, launches, mean and total duration, and where the DRAM bytes were collected the read rate they reached.
For profiles of a range of launches (--launch-skip/--launch-count), e.g. the decoding step's kernels replayed from
its graph (--graph-profiling node): the sum of the kernels' durations against the step's wall time says how much of
a step is the kernels themselves and how much the gaps between them.
    usage: python3 scripts/gpu/ncu_kernels.py PROFILE.csv
"""
import csv, sys
from collections import defaultdict

UNIT = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}
BYTES = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}


def main():
    lines = open(sys.argv[1], errors="replace").read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        sys.exit(f"{sys.argv[1]}: no ncu CSV header")
    us = defaultdict(float)
    by = defaultdict(float)
    n = defaultdict(set)
    for row in csv.DictReader(lines[start:]):
        name, metric, value, unit = row["Kernel Name"], row["Metric Name"], row["Metric Value"], row["Metric Unit"]
        try:
            v = float(value.replace(",", ""))
        except ValueError:
            continue
        n[name].add(row["ID"])
        if metric == "gpu__time_duration.sum":
            us[name] += v * UNIT.get(unit, 1.0)
        elif metric == "dram__bytes_read.sum":
            by[name] += v * BYTES.get(unit, 1.0)
    total = sum(us.values())
    print(f"{'kernel':40s} {'launches':>8s} {'mean µs':>9s} {'total µs':>10s} {'share':>6s} {'read GB/s':>9s}")
    for name in sorted(us, key=lambda k: -us[k]):
        c = len(n[name])
        rate = f"{by[name] / (us[name] * 1e-6) / 1e9:9.0f}" if by.get(name) else f"{'':9s}"
        print(f"{name[:40]:40s} {c:8d} {us[name] / c:9.2f} {us[name]:10.1f} {100 * us[name] / total:5.1f}% {rate}")
    print(f"{'all':40s} {sum(len(v) for v in n.values()):8d} {'':9s} {total:10.1f}")


if __name__ == "__main__":
    main()
