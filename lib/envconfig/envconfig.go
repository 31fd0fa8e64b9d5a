// Package envconfig is the one list of the MEMPO_* environment variables the
// commands, libraries, tests and scripts read, each with what it does. Go
// code reads a variable through its Var here, never through os.Getenv with a
// literal name, so the list printed by `mempo-* env` is complete (a test
// checks that every MEMPO_ name in the repository's Go files and scripts is
// listed). The variables only tests, benchmarks and the scripts under
// scripts/ read are marked Test; `env` lists them after the others.
package envconfig

import (
	"fmt"
	"os"
	"strings"
)

// Var is one environment variable.
type Var struct {
	Name  string
	Usage string
	// Test: read only by tests, benchmarks or scripts, never by a command.
	Test bool
}

// Get is the variable's value ("" when unset).
func (v Var) Get() string { return os.Getenv(v.Name) }

// On is whether the variable is set to "1".
func (v Var) On() bool { return os.Getenv(v.Name) == "1" }

// Or is the variable's value, or def when it is unset or empty.
func (v Var) Or(def string) string {
	if s := os.Getenv(v.Name); s != "" {
		return s
	}
	return def
}

var all []Var

func add(name, usage string) Var {
	v := Var{Name: name, Usage: usage}
	all = append(all, v)
	return v
}

func addTest(name, usage string) Var {
	v := Var{Name: name, Usage: usage, Test: true}
	all = append(all, v)
	return v
}

// The variables, in the order `env` lists them.
var (
	CUDALibDir      = add("MEMPO_CUDA_LIB_DIR", "folders (:-separated) searched first for libnvrtc, libcublas and libcuda.so.1, before /usr/local/cuda/lib64, the pip nvidia/*/lib folders and the dynamic loader")
	CUDADisable     = add("MEMPO_CUDA_DISABLE", "1: report CUDA unavailable (every auto device runs on the CPU)")
	CUDADevice      = add("MEMPO_CUDA_DEVICE", "CUDA device ordinal (default 0)")
	CUDACache       = add("MEMPO_CUDA_CACHE", "compiled-kernel cache folder (default $XDG_CACHE_HOME/mempo/cuda or ~/.cache/mempo/cuda)")
	CUDADebug       = add("MEMPO_CUDA_DEBUG", "1: synchronize and check after every kernel and GEMM, so an error names its kernel")
	CUDAKernelTimes = add("MEMPO_CUDA_KERNEL_TIMES", "1: mempo-rollout times every kernel and GEMM of its policy on the GPU (CUDA events; a little slower) and prints the totals by phase (prefill, decode, score) and kernel after its summary")
	CUDAFastMath    = add("MEMPO_CUDA_FAST_MATH", "1: compile the kernels with --use_fast_math")
	CUDASyncAlloc   = add("MEMPO_CUDA_SYNC_ALLOC", "1: plain cuMemAlloc/cuMemFree instead of the stream-ordered allocator")
	CUDABF16        = add("MEMPO_CUDA_BF16", "1: bf16 mode for every new model backend (as --device cuda-bf16)")
	CUDAAttn        = add("MEMPO_CUDA_ATTN", "attention kernels for A/B runs: kernel (attention2.cu for everything: no decode kernel, no tensor cores), gemm (cuBLAS attention instead of attnmma.cu in bf16 mode)")
	CUDADecode      = add("MEMPO_CUDA_DECODE", "decoding steps after the prefill: graph (default: the fused step replayed from a CUDA graph per batch bucket), direct (the same launches without graphs), generic (the model's op-by-op path)")
	CUDAPersist     = add("MEMPO_CUDA_PERSIST", "the layers of small bf16 decoding steps (one to four rows): 0 as separate launches, N ≥ 1 in one persistent launch of at most N blocks a multiprocessor (default: one launch of 1 block a multiprocessor for models with a hidden size of 3072 or more, where it was measured faster, separate launches below)")
	CUDASkinny      = add("MEMPO_CUDA_SKINNY", "0: bf16 decoding steps of 5 to 32 rows take cuBLAS for their q, k and v products (default: one launch of lib/cuda/kernels/skinny.cu, which streams the three weights through the tensor cores with k split over the chip)")
	CUDAPair        = add("MEMPO_CUDA_PAIR", "0: decoding steps that take cuBLAS run their gate and up products (and k and v) as two calls (default: one strided-batched call for each pair)")
	CUDAAttnGroup   = add("MEMPO_CUDA_ATTN_GROUP", "0: decoding steps of more than 4 rows take attention with a warp a query head (attn_split_sub, attn_split_merged) instead of attn_split_group, whose warps score 32 keys at once for every query head of a kv head")
	CUDAFuse        = add("MEMPO_CUDA_FUSE", "0: the forward's residual adds and the norms after them, q's and k's biases and RoPE, and the backward's norm gradients and the residual gradients added to them, as two launches each, and bf16 mode's RoPE backward on dq as a launch of its own (default: one each, add_rmsnorm_f32, rope_f32 with the bias, rmsnorm_bwd_dx_f32 with the residual: the same bits; dq rotated by attn_mma_bwd_dq as it stores it)")
	CUDAPDL         = add("MEMPO_CUDA_PDL", "0: launch the decoding step's kernels one after another (default: overlapped by programmatic dependent launch where the GPU has it, sm_90 and later)")
	HostOptimizer   = add("MEMPO_HOST_OPTIMIZER", "1: mempo-update keeps the AdamW step on the host even when the model is on the GPU")
	SkipMemCheck    = add("MEMPO_SKIP_MEMORY_CHECK", "1: mempo-update and sft start a GPU run even when their memory estimate exceeds the free device memory")
	DistFile        = add("MEMPO_DIST_FILE", "data-parallel rendezvous through a file on shared storage: rank 0 writes its address there, the other ranks read it (instead of MASTER_ADDR/MASTER_PORT); use a fresh path per run")
	NCCLLib         = add("MEMPO_NCCL_LIB", "path of libnccl.so.2, tried before the CUDA library folders and the pip nvidia/nccl/lib folders")
	CPUProfile      = add("MEMPO_CPUPROFILE", "FILE: every command writes a Go CPU profile of its run to FILE (go tool pprof FILE), for the host side of a run: tokenizing, scheduling, retrieval, file I/O")
)

// Read only by tests, benchmarks and scripts (Test).
var (
	RequireCUDA = addTest("MEMPO_REQUIRE_CUDA", "1: a test that needs CUDA fails instead of skipping when there is none (the GPU machine's runs)")
	RequireNCCL = addTest("MEMPO_REQUIRE_NCCL", "1: a test that needs NCCL fails instead of skipping when it is missing")
	CUDABench   = addTest("MEMPO_CUDA_BENCH", "1: run the GPU benchmarks, which are tests (lib/model, lib/encoder, lib/retrieval)")
	CUDAProfile = addTest("MEMPO_CUDA_PROFILE", "1: run lib/encoder's forward meant for a kernel profiler (TestCUDAEncoderProfile; scripts/gpu/run_encoder.sh's profile part runs it under ncu)")

	CUDABenchRuns   = addTest("MEMPO_CUDA_BENCH_RUNS", "lib/model's CUDA benchmark runs, model:mode list, mode fp32 or bf16 (default: both modes of MEMPO_CUDA_BENCH_MODELS)")
	CUDABenchModels = addTest("MEMPO_CUDA_BENCH_MODELS", "models of the CUDA benchmarks and of scripts/gpu/bench_torch.py (default qwen2.5-0.5b,qwen2.5-1.5b)")
	CUDABenchBatch  = addTest("MEMPO_CUDA_BENCH_BATCH", "training batch of the CUDA benchmark, in sequences of 2048 tokens (default 8)")
	DecodeBenchMods = addTest("MEMPO_CUDA_DECODE_BENCH_MODELS", "models of the decoding benchmark (default qwen2.5-0.5b,qwen2.5-1.5b,qwen2.5-7b)")
	DecodeBenchMode = addTest("MEMPO_CUDA_DECODE_BENCH_MODES", "decoding modes the decoding benchmark compares (default generic,direct,graph)")
	DecodeBenchRows = addTest("MEMPO_CUDA_DECODE_BENCH_BATCHES", "batch sizes of the decoding benchmark (default 1,32,256)")

	BenchEncoderBatches  = addTest("MEMPO_BENCH_ENCODER_BATCHES", "document batches of the GPU encoder benchmark (default 64,128,256)")
	BenchEncoderCPUBatch = addTest("MEMPO_BENCH_ENCODER_CPU_BATCH", "CPU batch of the GPU encoder benchmark's comparison (default 16)")
	BenchEncoderBatch    = addTest("MEMPO_BENCH_ENCODER_BATCH", "batch of the CPU encoder benchmark")
	BenchDenseN          = addTest("MEMPO_BENCH_DENSE_N", "passages of the dense retrieval benchmark")
	BenchDenseSizes      = addTest("MEMPO_BENCH_DENSE_SIZES", "index sizes of the GPU flat-search benchmark (default 1000000,21000000)")
	BenchDenseBatches    = addTest("MEMPO_BENCH_DENSE_BATCHES", "query batches of the GPU flat-search benchmark (default 1,64,512)")
	BenchDenseK          = addTest("MEMPO_BENCH_DENSE_K", "top k of the GPU flat-search benchmark (default 10)")
	BenchDenseDim        = addTest("MEMPO_BENCH_DENSE_DIM", "vector size of the GPU flat-search benchmark (default 768)")
	BenchIndex           = addTest("MEMPO_BENCH_INDEX", "an index directory for the large BM25 benchmark (scripts/bench_retrieval_1m.sh)")
	BenchFaissN          = addTest("MEMPO_BENCH_FAISS_N", "vectors of the FAISS benchmark")
	BenchE2EN            = addTest("MEMPO_BENCH_E2E_N", "passages of the end-to-end retrieval benchmark's synthetic corpus (default 100000)")
	BenchE2ESeconds      = addTest("MEMPO_BENCH_E2E_SECONDS", "seconds per concurrency of the end-to-end retrieval benchmark (default 4)")
	BenchE2EClients      = addTest("MEMPO_BENCH_E2E_CLIENTS", "client counts of the end-to-end retrieval benchmark (default 16,64,256)")
	ServeBin             = addTest("MEMPO_SERVE_BIN", "a built mempo-serve for the retrieval benchmark through HTTP")

	RolloutDelay  = addTest("MEMPO_ROLLOUT_DELAY", "a Go duration: mempo-rollout's tests slow their scripted policy by it, so a run can be killed partway")
	TBOut         = addTest("MEMPO_TB_OUT", "a folder: the TensorBoard tests copy their event files there for scripts/check_tensorboard.py")
	PeftFixture   = addTest("MEMPO_PEFT_FIXTURE", "a folder: TestWritePeftFixture writes scripts/check_peft.py's inputs there")
	WriteFixtures = addTest("MEMPO_WRITE_FIXTURES", "set: the fixture tests of lib/records and lib/report rewrite their golden files")
	LargeCheckDir = addTest("MEMPO_LARGE_CHECK_DIR", "a folder: lib/records writes a large Parquet cross-check set there for scripts/check_parquet.py")
	KeepReport    = addTest("MEMPO_KEEP_REPORT", "a folder: lib/report's test copies the report it wrote there")
	IndexAsMain   = addTest("MEMPO_INDEX_AS_MAIN", "1: the mempo-index test binary runs as the command (testenv.CommandMain)")
	ServeAsMain   = addTest("MEMPO_SERVE_AS_MAIN", "1: the mempo-serve test binary runs as the command")
	RolloutAsMain = addTest("MEMPO_ROLLOUT_AS_COMMAND", "1: the mempo-rollout test binary runs as the command")
	UpdateAsMain  = addTest("MEMPO_UPDATE_AS_MAIN", "1: the mempo-update test binary runs as the command")
	ScoreAsMain   = addTest("MEMPO_SCORE_AS_MAIN", "1: the mempo-score test binary runs as the command")
	SkipTorch     = addTest("MEMPO_SKIP_TORCH", "1: scripts/gpu/run.sh runs mempo's benchmarks only, not PyTorch's")
	TorchDtypes   = addTest("MEMPO_TORCH_DTYPES", "dtypes of scripts/gpu/bench_torch.py (default bf16,fp32)")
	TorchParts    = addTest("MEMPO_TORCH_PARTS", "parts of scripts/gpu/bench_torch.py: train,prefill,decode")
	TorchTrain    = addTest("MEMPO_TORCH_TRAIN", "training steps of scripts/gpu/bench_torch.py: full (whole logits, the default), chunked (LM head in chunks, gradients made in the forward), compiled (chunked, body under torch.compile)")
	TorchProfile  = addTest("MEMPO_TORCH_PROFILE", "1: scripts/gpu/bench_torch.py profiles one step of each training variant (CUDA time by kernel family, largest kernels)")
	NVRTCLib      = addTest("MEMPO_NVRTC", "the NVRTC library scripts/kernel_check.py (make kernel-check) loads (default: the first of libnvrtc.so, .13, .12, .11.2 found)")
	BenchTimeout  = addTest("MEMPO_BENCH_TIMEOUT", "seconds scripts/gpu/run.sh gives each benchmark (default 900)")
)

// All lists the variables.
func All() []Var { return append([]Var(nil), all...) }

// Table is the list as `mempo-* env` prints it: name, current value when
// set, and usage.
func Table() string {
	var b strings.Builder
	for i, v := range all {
		if v.Test && (i == 0 || !all[i-1].Test) {
			b.WriteString("\nRead only by tests, benchmarks and scripts:\n")
		}
		val := "(unset)"
		if s, ok := os.LookupEnv(v.Name); ok {
			val = fmt.Sprintf("%q", s)
		}
		fmt.Fprintf(&b, "%-22s %s\n    %s\n", v.Name, val, v.Usage)
	}
	return b.String()
}
