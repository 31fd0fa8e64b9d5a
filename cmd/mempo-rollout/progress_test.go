package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/rollout"
	"github.com/mempo/mempo/lib/testenv"
)

// checkRolloutTB reads the --tb directory of a finished rollout: one event
// per engine turn with the running totals, the last holding every
// trajectory and the file's mean R^T. With MEMPO_TB_OUT set the file is
// copied there for scripts/check_tensorboard.py.
func checkRolloutTB(t *testing.T, dir string, rows []records.Rollout) {
	t.Helper()
	evs, file := testenv.EventFile(t, dir)
	if len(evs) < 3 || evs[0].FileVersion == "" {
		t.Fatalf("%d events", len(evs))
	}
	last := map[string]float64{}
	for _, ev := range evs[1:] {
		for _, s := range ev.Scalars {
			last[s.Tag] = s.Value
		}
	}
	rt := 0.0
	for _, r := range rows {
		rt += r.RewardTask
	}
	rt /= float64(len(rows))
	if last["rollout/trajectories_done"] != float64(len(rows)) || math.Abs(last["rollout/final_reward_task_mean"]-rt) > 1e-6 ||
		math.Abs(last["rollout/reward_task_mean"]-rt) > 1e-6 || !(last["rollout/gen_tokens_per_s"] > 0) ||
		!(last["rollout/generate_calls"] >= 1) || !(last["rollout/kv_cache_positions_max"] > 0) || !(last["rollout/kv_cache_positions_peak"] > 0) {
		t.Errorf("last scalars %v; %d rows, mean R^T %v", last, len(rows), rt)
	}
	if dst := envconfig.TBOut.Get(); dst != "" {
		raw, _ := os.ReadFile(file)
		os.MkdirAll(filepath.Join(dst, "rollout"), 0o755)
		if err := os.WriteFile(filepath.Join(dst, "rollout", filepath.Base(file)), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestProgressLine(t *testing.T) {
	st := rollout.Stats{Tasks: 10, GroupSize: 4, TasksDone: 2, Trajectories: 8, TrajectoryTurns: 24, Steps: 60, InFlight: 16,
		Turns: 7, GeneratedTokens: 900, PendingTokens: 100, RewardTaskSum: 2, Wall: 10 * time.Second}
	got := progressLine(st, 1, 11, 16)
	// 60 of 40×3 steps done after 10 s: 10 s left.
	want := "rollout: 3/11 tasks, 8 trajectories done, 16 in flight, 7 turns, 60 steps, 100 tok/s, mean R^T 0.250, ETA 10s"
	if got != want {
		t.Errorf("progress line\n got %q\nwant %q", got, want)
	}
	// Before any trajectory finished the ETA assumes every trajectory takes
	// the turn budget (16): 60 of 640 steps.
	st.Trajectories, st.TrajectoryTurns, st.TasksDone = 0, 0, 0
	if got := progressLine(st, 0, 10, 16); got != "rollout: 0/10 tasks, 0 trajectories done, 16 in flight, 7 turns, 60 steps, 100 tok/s, ETA 1m37s" {
		t.Errorf("before the first finish: %q", got)
	}
}
