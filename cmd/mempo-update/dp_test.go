package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/testenv"
	"github.com/mempo/mempo/lib/update"
)

// dpTol bounds |w_N ranks − w_1 process| over the weights of the test's
// four-step plan (lr 1e-3): N ranks sum each mini-batch's gradient as N
// shards, one process as one, so the float32 roundings differ. Measured
// about 1e-7 on the tiny model; docs/TRAINING.md states the same bound.
const dpTol = 1e-5

func runRanks(t *testing.T, n int, args ...string) string {
	t.Helper()
	code, out := testenv.RunCommand(t, asMain, append(args, "--nproc", itoa(n))...)
	if code != 0 {
		t.Fatalf("--nproc %d: exit %d: %s", n, code, out)
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

func sameState(t *testing.T, what, a, b string) {
	t.Helper()
	sa, ra, err := update.ReadOptimizer(filepath.Join(a, update.OptimizerFile))
	if err != nil {
		t.Fatal(err)
	}
	sb, rb, err := update.ReadOptimizer(filepath.Join(b, update.OptimizerFile))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sa, sb) {
		t.Errorf("%s: optimizer states differ", what)
	}
	if ra.GlobalStep != rb.GlobalStep || ra.PlanStep != rb.PlanStep {
		t.Errorf("%s: run states %+v vs %+v", what, ra, rb)
	}
}

func sameRows(t *testing.T, what, a, b string) {
	t.Helper()
	r1, err1 := records.ReadFile[records.Update](filepath.Join(a, update.MetricsFile))
	r2, err2 := records.ReadFile[records.Update](filepath.Join(b, update.MetricsFile))
	if err1 != nil || err2 != nil || len(r1) != len(r2) || len(r1) == 0 {
		t.Fatalf("%s: rows %d, %d: %v %v", what, len(r1), len(r2), err1, err2)
	}
	for i := range r1 {
		r1[i].WallS, r2[i].WallS, r1[i].Policy, r2[i].Policy = 0, 0, "", ""
		if !reflect.DeepEqual(r1[i], r2[i]) {
			t.Errorf("%s: row %d: %+v vs %+v", what, i, r1[i], r2[i])
		}
	}
}

// N ranks equal the one-process update with N gradient shards bit for bit
// (weights, sharded AdamW state, metrics), and the one-shard update within
// dpTol; the sharded state resumes on another number of ranks and in one
// process; a partial run continues on another number of ranks.
func TestDataParallelUpdate(t *testing.T) {
	f := newUpdFixture(t)
	args := append([]string{"--model", f.model, "--ref", f.ref, "--rollouts", f.rollouts}, knobArgs...)
	out := func(name string) string { return filepath.Join(f.root, name) }
	for _, n := range []int{1, 2, 4} {
		if msg, err := runUpdateCmd(t, append(args, "--out", out("gs"+itoa(n)), "--grad-shards", itoa(n))...); err != nil {
			t.Fatal(msg, err)
		}
	}
	for _, n := range []int{2, 4} {
		dp, gs := out("dp"+itoa(n)), out("gs"+itoa(n))
		msg := runRanks(t, n, append(args, "--out", dp)...)
		if !strings.Contains(msg, "wrote "+dp) {
			t.Errorf("--nproc %d printed %q", n, msg)
		}
		sameTensors(t, "weights of --nproc "+itoa(n), readTensors(t, filepath.Join(dp, "model.safetensors")), readTensors(t, filepath.Join(gs, "model.safetensors")))
		sameState(t, "--nproc "+itoa(n), dp, gs)
		sameRows(t, "--nproc "+itoa(n), dp, gs)
		for r := 0; r < n; r++ {
			if _, err := os.Stat(filepath.Join(dp, update.OptimizerShardFile(r, n))); err != nil {
				t.Error(err)
			}
		}
		if d := maxDiff(readTensors(t, filepath.Join(dp, "model.safetensors")), readTensors(t, filepath.Join(out("gs1"), "model.safetensors"))); d > dpTol || d == 0 {
			t.Errorf("--nproc %d vs one process: max |Δw| = %g, want 0 < Δ ≤ %g", n, d, dpTol)
		} else {
			t.Logf("--nproc %d vs one process, one shard: max |Δw| = %g", n, d)
		}
	}

	// The next update from the 2-rank checkpoint (sharded state) on 4 ranks,
	// and in one process, equals the one from the one-process checkpoint.
	next := func(from, to string, extra ...string) []string {
		return append(append([]string{"--model", from, "--ref", f.ref, "--rollouts", f.rollouts, "--out", to}, knobArgs...), extra...)
	}
	runRanks(t, 4, next(out("dp2"), out("next-dp"))...)
	if msg, err := runUpdateCmd(t, next(out("gs2"), out("next-gs"), "--grad-shards", "4")...); err != nil {
		t.Fatal(msg, err)
	}
	if msg, err := runUpdateCmd(t, next(out("dp2"), out("next-1"), "--grad-shards", "4")...); err != nil {
		t.Fatal(msg, err)
	}
	for _, o := range []string{"next-dp", "next-1"} {
		sameTensors(t, o, readTensors(t, filepath.Join(out(o), "model.safetensors")), readTensors(t, filepath.Join(out("next-gs"), "model.safetensors")))
		sameState(t, o, out(o), out("next-gs"))
	}

	// A partial 2-rank run continues on 4 ranks.
	part := out("part")
	if msg := runRanks(t, 2, append(args, "--out", part, "--stop-after", "1")...); !strings.Contains(msg, "after step 1 of 4") {
		t.Fatal(msg)
	}
	if msg := runRanks(t, 4, append(args, "--out", part)...); !strings.Contains(msg, "resuming at step 1") {
		t.Fatal(msg)
	}
	if d := maxDiff(readTensors(t, filepath.Join(part, "model.safetensors")), readTensors(t, filepath.Join(out("dp2"), "model.safetensors"))); d > dpTol {
		t.Errorf("resumed on 4 ranks vs 2 ranks throughout: max |Δw| = %g > %g", d, dpTol)
	}
}

// A rank that fails stops the others, and the launcher says which.
func TestDataParallelRankFailure(t *testing.T) {
	f := newUpdFixture(t)
	code, msg := testenv.RunCommand(t, asMain, append([]string{"--model", f.model, "--ref", f.ref, "--rollouts", f.rollouts,
		"--out", filepath.Join(f.root, "o"), "--nproc", "2", "--optim-state", "8bit"}, knobArgs...)...)
	if code == 0 || !strings.Contains(msg, "rank 0 of 2 failed") && !strings.Contains(msg, "rank 1 of 2 failed") {
		t.Errorf("exit %d: %s", code, msg)
	}
	if !strings.Contains(msg, "fp32 AdamW state") {
		t.Errorf("the failing rank's own line is missing: %s", msg)
	}
}
