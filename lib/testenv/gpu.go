package testenv

import (
	"testing"

	"github.com/mempo/mempo/lib/envconfig"
)

// NeedCUDA skips the test, saying why, when CUDA is not usable (ok false);
// under MEMPO_REQUIRE_CUDA=1 (the GPU machine's runs, where a skip would
// hide a missing GPU) it fails instead.
func NeedCUDA(t testing.TB, ok bool, why string) {
	t.Helper()
	if ok {
		return
	}
	if envconfig.RequireCUDA.On() {
		t.Fatalf("MEMPO_REQUIRE_CUDA=1 but no CUDA: %s", why)
	}
	t.Skipf("no CUDA: %s", why)
}

// NeedNCCL is NeedCUDA for NCCL (err: why it did not load) and
// MEMPO_REQUIRE_NCCL.
func NeedNCCL(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if envconfig.RequireNCCL.On() {
		t.Fatalf("MEMPO_REQUIRE_NCCL=1 but %v", err)
	}
	t.Skipf("no NCCL: %v", err)
}
