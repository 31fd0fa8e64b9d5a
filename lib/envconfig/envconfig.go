// Package envconfig is the one list of the MEMPO_* environment variables the
// commands and libraries read, each with what it does. Code reads a
// variable through its Var here, never through os.Getenv with a literal
// name, so the list printed by `mempo-* env` is complete (a test checks
// that no other MEMPO_ name is read outside tests). The variables only
// tests and benchmarks read are documented where they are read and in
// docs/GPU.md and docs/BENCHMARKS.md.
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
}

// Get is the variable's value ("" when unset).
func (v Var) Get() string { return os.Getenv(v.Name) }

// On is whether the variable is set to "1".
func (v Var) On() bool { return os.Getenv(v.Name) == "1" }

var all []Var

func add(name, usage string) Var {
	v := Var{Name: name, Usage: usage}
	all = append(all, v)
	return v
}

// The variables, in the order `env` lists them.
var (
	CUDALibDir    = add("MEMPO_CUDA_LIB_DIR", "folders (:-separated) searched first for libnvrtc, libcublas and libcuda.so.1, before /usr/local/cuda/lib64, the pip nvidia/*/lib folders and the dynamic loader")
	CUDADisable   = add("MEMPO_CUDA_DISABLE", "1: report CUDA unavailable (every auto device runs on the CPU)")
	CUDADevice    = add("MEMPO_CUDA_DEVICE", "CUDA device ordinal (default 0)")
	CUDACache     = add("MEMPO_CUDA_CACHE", "compiled-kernel cache folder (default $XDG_CACHE_HOME/mempo/cuda or ~/.cache/mempo/cuda)")
	CUDADebug     = add("MEMPO_CUDA_DEBUG", "1: synchronize and check after every kernel and GEMM, so an error names its kernel")
	CUDAFastMath  = add("MEMPO_CUDA_FAST_MATH", "1: compile the kernels with --use_fast_math")
	CUDASyncAlloc = add("MEMPO_CUDA_SYNC_ALLOC", "1: plain cuMemAlloc/cuMemFree instead of the stream-ordered allocator")
	CUDABF16      = add("MEMPO_CUDA_BF16", "1: bf16 mode for every new model backend (as --device cuda-bf16)")
	CUDAAttn      = add("MEMPO_CUDA_ATTN", "attention kernels for A/B runs: v1 (the first fp32 kernels for everything), kernel (attention2.cu for everything), gemm (cuBLAS attention instead of attnmma.cu in bf16 mode)")
	CUDADecode    = add("MEMPO_CUDA_DECODE", "decoding steps after the prefill: graph (default: the fused step replayed from a CUDA graph per batch bucket), direct (the same launches without graphs), generic (the model's op-by-op path)")
	HostOptimizer = add("MEMPO_HOST_OPTIMIZER", "1: mempo-update keeps the AdamW step on the host even when the model is on the GPU")
	SkipMemCheck  = add("MEMPO_SKIP_MEMORY_CHECK", "1: mempo-update and sft start a GPU run even when their memory estimate exceeds the free device memory")
	DistFile      = add("MEMPO_DIST_FILE", "data-parallel rendezvous through a file on shared storage: rank 0 writes its address there, the other ranks read it (instead of MASTER_ADDR/MASTER_PORT); use a fresh path per run")
	NCCLLib       = add("MEMPO_NCCL_LIB", "path of libnccl.so.2, tried before the CUDA library folders and the pip nvidia/nccl/lib folders")
)

// All lists the variables.
func All() []Var { return append([]Var(nil), all...) }

// Table is the list as `mempo-* env` prints it: name, current value when
// set, and usage.
func Table() string {
	var b strings.Builder
	for _, v := range all {
		val := "(unset)"
		if s, ok := os.LookupEnv(v.Name); ok {
			val = fmt.Sprintf("%q", s)
		}
		fmt.Fprintf(&b, "%-22s %s\n    %s\n", v.Name, val, v.Usage)
	}
	return b.String()
}
