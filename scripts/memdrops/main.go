// Command memdrops reads rollouts files of the world demo and counts the
// memory drops in them: steps that repeat the previous step's search with
// the same memory, the signature of a fact that was found and not filed
// (what the lossy expert, mempo-rollout expert --drop-rate, demonstrates).
// For each file it prints the drop rate (repeats over search steps) and the
// mean memory reward R^M and P(gold | mem) of those steps against the other
// searches after the first and the last steps, so one can check that R^M ranks a memory that
// dropped a fact below one that kept it (docs/DEMO.md). With each mean comes
// the mean memory advantage A^M those steps get from mempo-update's defaults
// (the z-score over the task's pool), under --mem-pool step (over the
// memories of the same step index) and under --mem-baseline previous (R^M
// as the gain over the previous memory), and, where the rollouts were scored
// per objective, under --mem-pool step --mem-per-objective: what the update
// pushes, where the raw R^M means mix steps of different depth. A file whose tasks have
// several objective counts gets the same counts for each k on lines of its own.
//
//	go run ./scripts/memdrops runs/demo/mempo/rollouts-1.parquet …
package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"

	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/rl"
	"github.com/mempo/mempo/lib/update"
)

type acc struct {
	n        int
	rm, pgm  float64
	adv      [4]float64 // summed A^M: the defaults, --mem-pool step, --mem-baseline previous, step pool per objective (NaN: not scored per objective)
	withTerm int
}

// add counts step st, whose memory advantages under advConfigs' four are
// adv (used only where st has its memory terms).
func (a *acc) add(st records.Step, adv [4]float64) {
	a.n++
	if st.RMem != nil && st.PGoldMem != nil {
		a.withTerm++
		a.rm += *st.RMem
		a.pgm += *st.PGoldMem
		for k := range adv {
			a.adv[k] += adv[k]
		}
	}
}

func (a acc) String() string {
	if a.withTerm == 0 {
		return fmt.Sprintf("%d steps (no R^M)", a.n)
	}
	n := float64(a.withTerm)
	per := ""
	if !math.IsNaN(a.adv[3]) {
		per = fmt.Sprintf(", per objective %+.3f", a.adv[3]/n)
	}
	return fmt.Sprintf("%d steps, R^M %.4f, P(gold|mem) %.4f, A^M %+.3f (step pool %+.3f, gain %+.3f%s)", a.n, a.rm/n, a.pgm/n, a.adv[0]/n, a.adv[1]/n, a.adv[2]/n, per)
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: memdrops ROLLOUTS.parquet …")
		os.Exit(2)
	}
	for _, f := range os.Args[1:] {
		if err := report(os.Stdout, f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// report writes rollouts file f's line.
func report(w io.Writer, f string) error {
	rows, err := records.ReadFile[records.Rollout](f)
	if err != nil {
		return err
	}
	var advs [4][][]float64
	perObjective := !missingPerObjective(rows)
	for k, cfg := range advConfigs() {
		if cfg.MemPerObjective && !perObjective {
			continue // the column is left out
		}
		if advs[k], err = memAdvantages(rows, cfg); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	all := &tally{}
	byK := map[int32]*tally{}
	for j, r := range rows {
		tk := byK[r.K]
		if tk == nil {
			tk = &tally{}
			byK[r.K] = tk
		}
		for _, t := range []*tally{all, tk} {
			t.add(r, func(i int) [4]float64 {
				a := [4]float64{advs[0][j][i], advs[1][j][i], advs[2][j][i], math.NaN()}
				if advs[3] != nil {
					a[3] = advs[3][j][i]
				}
				return a
			})
		}
	}
	if _, err := fmt.Fprintf(w, "%s: %v\n", f, all); err != nil {
		return err
	}
	// Files of tasks with several objective counts (RL_K="2 4 8") get a line
	// per k: what the memory reward does at k = 8 drowns in the pooled means.
	if len(byK) > 1 {
		for _, k := range slices.Sorted(maps.Keys(byK)) {
			if _, err := fmt.Fprintf(w, "  k = %d: %v\n", k, byK[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// tally counts the steps of some trajectories by kind: drops, the other
// searches after the first step, and the last steps (answers).
type tally struct {
	trajs, searches    int
	correct            float64
	drop, kept, answer acc
}

// add counts trajectory r, whose step i has the memory advantages adv(i).
func (t *tally) add(r records.Rollout, adv func(i int) [4]float64) {
	t.trajs++
	t.correct += r.RewardTask
	mem := func(s records.Step) []int32 {
		if s.MemStart < 0 || s.MemEnd > int32(len(s.OutputIDs)) || s.MemStart > s.MemEnd {
			return nil
		}
		return s.OutputIDs[s.MemStart:s.MemEnd]
	}
	for i, st := range r.Steps {
		if st.Action == "search" {
			t.searches++
		}
		if i == 0 {
			continue
		}
		p := r.Steps[i-1]
		a := &t.answer
		if st.Action == "search" && p.Action == "search" && st.Query == p.Query && slices.Equal(mem(st), mem(p)) {
			a = &t.drop
		} else if st.Action == "search" {
			a = &t.kept
		}
		a.add(st, adv(i))
	}
}

func (t *tally) String() string {
	rate := 0.0
	if t.searches > 0 {
		rate = float64(t.drop.n) / float64(t.searches)
	}
	return fmt.Sprintf("%d trajectories, mean R^T %.3f, drop rate %.3f of %d searches; drops: %v; other searches after the first: %v; last steps: %v",
		t.trajs, t.correct/float64(max(t.trajs, 1)), rate, t.searches, t.drop, t.kept, t.answer)
}

// advConfigs are the advantage configurations report compares:
// mempo-update's defaults, --mem-pool step, --mem-baseline previous and
// --mem-pool step --mem-per-objective.
func advConfigs() [4]rl.AdvConfig {
	def, step, gain := rl.DefaultAdvConfig(), rl.DefaultAdvConfig(), rl.DefaultAdvConfig()
	step.MemPool = rl.PoolStep
	gain.MemBaseline = rl.BaselinePrevMemory
	per := step
	per.MemPerObjective = true
	return [4]rl.AdvConfig{def, step, gain, per}
}

// missingPerObjective says whether some step with memory terms was not
// scored per objective (the per-objective column is then left out).
func missingPerObjective(rows []records.Rollout) bool {
	for _, r := range rows {
		for _, st := range r.Steps {
			if st.RMem != nil && len(st.PGoldMemObj) == 0 {
				return true
			}
		}
	}
	return false
}

// memAdvantages returns the memory advantage A^M of every step of rows as
// mempo-update computes it under cfg (one group per task and group index);
// 0 where a step has no R^M.
func memAdvantages(rows []records.Rollout, cfg rl.AdvConfig) ([][]float64, error) {
	trajs := make([]rl.TrajReward, len(rows))
	for i := range rows {
		trajs[i] = update.TrajRewardOf(&rows[i], cfg)
	}
	adv, err := cfg.ComputeAdvantages(trajs)
	if err != nil {
		return nil, err
	}
	return adv.Mem, nil
}
