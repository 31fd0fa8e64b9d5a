package main

import (
	"fmt"

	"github.com/mempo/mempo/lib/cli"
	"github.com/mempo/mempo/lib/rollout"
	"github.com/mempo/mempo/lib/tbevent"
)

// progressLine is the live status of a rollout: tasks and trajectories
// finished and in flight, engine turns, generation speed (counting the
// tokens of the Generate call still running) and an ETA that counts the
// turns of trajectories still in flight.
func progressLine(st rollout.Stats, resumed, tasks, maxTurns int) string {
	sec := max(st.Wall.Seconds(), 1e-9)
	tok := st.GeneratedTokens + st.PendingTokens
	line := fmt.Sprintf("rollout: %d/%d tasks, %d trajectories done, %d in flight, %d turns, %d steps, %.0f tok/s",
		resumed+st.TasksDone, tasks, st.Trajectories, st.InFlight, st.Turns, st.Steps, float64(tok)/sec)
	if st.Trajectories > 0 {
		line += fmt.Sprintf(", mean R^T %.3f", st.RewardTaskSum/float64(st.Trajectories))
	}
	if eta := cli.ETA(st.Wall, st.Fraction(maxTurns)); eta != "" {
		line += ", " + eta
	}
	return line
}

// openTB opens a TensorBoard event file in dir, or returns nil (a nil
// Writer ignores Add) when dir is "".
func openTB(dir string) (*tbevent.Writer, error) {
	if dir == "" {
		return nil, nil
	}
	return tbevent.Create(dir)
}

// rolloutScalars are the running totals of a rollout as TensorBoard
// scalars, stepped by engine turn.
func rolloutScalars(st rollout.Stats) []tbevent.Scalar {
	sec := max(st.Wall.Seconds(), 1e-9)
	s := []tbevent.Scalar{
		{Tag: "rollout/tasks_done", Value: float64(st.TasksDone)},
		{Tag: "rollout/trajectories_done", Value: float64(st.Trajectories)},
		{Tag: "rollout/in_flight", Value: float64(st.InFlight)},
		{Tag: "rollout/steps", Value: float64(st.Steps)},
		{Tag: "rollout/gen_tokens_per_s", Value: float64(st.GeneratedTokens) / sec},
		{Tag: "rollout/trajectories_per_s", Value: float64(st.Trajectories) / sec},
		{Tag: "rollout/retrieval_wait_share", Value: st.SearchShare()},
		{Tag: "rollout/wall_s", Value: st.Wall.Seconds()},
		{Tag: "rollout/generate_calls", Value: float64(st.GenerateCalls)},
		{Tag: "rollout/kv_cache_positions_max", Value: float64(st.CacheRowsMax)},
		{Tag: "rollout/kv_cache_positions_peak", Value: float64(st.CacheRowsPeak)},
		{Tag: "rollout/preempted_rows", Value: float64(st.Preempted)},
	}
	if st.Trajectories > 0 {
		s = append(s,
			tbevent.Scalar{Tag: "rollout/reward_task_mean", Value: st.RewardTaskSum / float64(st.Trajectories)},
			tbevent.Scalar{Tag: "rollout/turns_per_trajectory", Value: float64(st.TrajectoryTurns) / float64(st.Trajectories)})
	}
	return s
}
