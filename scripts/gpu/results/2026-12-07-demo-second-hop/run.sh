#!/usr/bin/env bash
# scripts/memhop over the fresh seeds' runs (../2026-12-07-demo-new-preset-cpu,
# E=/tmp/fresh): each run's MemPO and GRPO training rollouts (iterations 1, 4,
# 8, 12) and greedy evaluations at k = 4 and 8, SFT's once a seed.
cd "$(dirname "$0")/../../../.."
E=${E:-/tmp/fresh} D=scripts/gpu/results/2026-12-07-demo-second-hop
go build -o /tmp/memhop ./scripts/memhop
for s in 4 5; do for d in seed$s seed$s-rl2 seed$s-rl3; do
	for m in mempo grpo; do /tmp/memhop $E/seed$s/world/tokenizer.json $(for i in 1 4 8 12; do echo $E/$d/$m/rollouts-$i.parquet; done); done
	/tmp/memhop $E/seed$s/world/tokenizer.json $E/$d/eval/{mempo,grpo}-k{4,8}.parquet
done; /tmp/memhop $E/seed$s/world/tokenizer.json $E/seed$s/eval/sft-k{4,8}.parquet; done | sed "s|$E/||" > $D/memhop.txt
