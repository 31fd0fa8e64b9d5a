package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/testenv"
	"github.com/mempo/mempo/lib/update"
)

// --target-kl on the four-step plan of knobArgs: the first mini-batch is
// on-policy (approximate KL ~1e-14, the rounding of the recomputed
// log-probs), the second is measured after one step at lr 1e-3, far above
// 1.5e-8. The update stops before it: one row, whose stop_approx_kl is
// that KL, a stderr line, a finished checkpoint (a rerun has nothing to
// do, the run state says stopped) and the TensorBoard scalars.
func TestTargetKLStopsTheUpdate(t *testing.T) {
	f := newUpdFixture(t)
	out, tb, metrics := filepath.Join(f.root, "out"), filepath.Join(f.root, "tb"), filepath.Join(f.root, "m.jsonl")
	args := append([]string{"--model", f.model, "--ref", f.ref, "--rollouts", f.rollouts, "--out", out, "--tb", tb,
		"--metrics", metrics, "--target-kl", "1e-8"}, knobArgs...)
	msg, err := runUpdateCmd(t, args...)
	if err != nil {
		t.Fatal(msg, err)
	}
	if !strings.Contains(msg, "step 2/4: approx KL to the rollout policy") || !strings.Contains(msg, "stopped after 1 of 4 steps") ||
		!strings.Contains(msg, "1 of 4 steps (stopped by --target-kl)") {
		t.Errorf("output %q", msg)
	}
	rows, err := records.ReadFile[records.Update](metrics)
	if err != nil || len(rows) != 1 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	if rows[0].StopApproxKL == nil || !(*rows[0].StopApproxKL > 1.5e-8) || !(rows[0].ApproxKL < 1e-10) {
		t.Errorf("row approx_kl %v stop_approx_kl %v", rows[0].ApproxKL, rows[0].StopApproxKL)
	}
	_, rs, err := update.ReadOptimizerMeta(filepath.Join(out, update.OptimizerFile))
	if err != nil || !rs.Stopped || rs.PlanStep != 1 || rs.PlanSteps != 4 || rs.GlobalStep != 1 || rs.Iteration != 1 {
		t.Errorf("run state %+v, %v", rs, err)
	}
	if msg, err := runUpdateCmd(t, args...); err != nil || !strings.Contains(msg, "nothing to do") {
		t.Errorf("rerun of a stopped run: %q %v", msg, err)
	}
	evs, _ := testenv.EventFile(t, tb)
	got := map[string]float64{}
	for _, ev := range evs {
		for _, s := range ev.Scalars {
			got[s.Tag] = s.Value
		}
	}
	if got["update/steps_taken"] != 1 || got["update/stop_approx_kl"] != float64(float32(*rows[0].StopApproxKL)) {
		t.Errorf("scalars %v", got)
	}

	// Without the flag the same command takes all four steps, and its
	// first row is the stopped run's.
	full := filepath.Join(f.root, "full")
	args = append([]string{"--model", f.model, "--ref", f.ref, "--rollouts", f.rollouts, "--out", full}, knobArgs...)
	if msg, err := runUpdateCmd(t, args...); err != nil {
		t.Fatal(msg, err)
	}
	all, _ := records.ReadFile[records.Update](filepath.Join(full, update.MetricsFile))
	if len(all) != 4 || all[0].Loss != rows[0].Loss || all[1].ApproxKL != *rows[0].StopApproxKL || all[3].StopApproxKL != nil {
		t.Errorf("unguarded rows %+v", all)
	}
}
