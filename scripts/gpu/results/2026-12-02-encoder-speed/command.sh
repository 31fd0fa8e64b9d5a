#!/usr/bin/env bash
# The run of this folder's logs (docs/BENCHMARKS.md, "Encoder: 128-row attention tiles, leaner LayerNorm and GELU").
# Here, where Go is (the measured build was d9221f3; the base f68b236, main before the change):
#   BASE_REV=f68b236 bash scripts/gpu/bundle_encoder.sh
# then on the GPU machine, from the repository root, carrying bin/gpu/encoder (215.6 s):
RUN_LIMIT=232 RUN_BUDGET=192 PARTS="encoder transformers profile" TEST_RUN='GPU|UseDevice' \
	MEMPO_BENCH_ENCODER_CPU_BATCH=0 TRANSFORMERS_RUNS=cuda:fp16:64:256,cuda:fp16:128:256,cuda:fp16:256:256 \
	bash scripts/gpu/run_encoder.sh
