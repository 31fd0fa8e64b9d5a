package update

import (
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/mempo/mempo/lib/dist"
)

// Three ranks in this process (TCP through rank 0) with gradient buckets
// of 37 floats, so buckets split tensors and span several: every rank ends
// with the weights, row and (joined) optimizer state of the one-process
// Step(p, k, 3), bit for bit, over a two-epoch plan.
func TestDataParallelEqualsShardedStep(t *testing.T) {
	const n = 3
	s := synth{tasks: 3, G: 3, steps: 2, rt: func(task, g int) float64 { return float64((task + g) % 2) }, noise: 0.05, seed: 5}
	rolls := s.rollouts(t, tinyModel(t, 3))
	cfg := noKL()
	cfg.Schedule.PeakLR = 1e-3
	plan := Plan{NTraj: 9, Epochs: 2, MiniBatch: 4, Seed: 3}

	one := tinyModel(t, 3)
	b, err := Prepare(rolls, rlOpts(one))
	if err != nil {
		t.Fatal(err)
	}
	t1, err := NewTrainer(one, b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var want []StepResult
	for k := 0; k < plan.Steps(); k++ {
		r, err := t1.Step(plan, k, n)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, *r)
	}

	file := filepath.Join(t.TempDir(), "addr")
	errs := make([]error, n)
	states := make([]map[string]int64, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			errs[r] = func() error {
				c, err := dist.Join(dist.Env{Rank: r, Size: n, File: file})
				if err != nil {
					return err
				}
				defer c.Close()
				m := tinyModel(t, 3)
				b, err := Prepare(rolls, rlOpts(m))
				if err != nil {
					return err
				}
				tr, err := NewTrainer(m, b, cfg)
				if err != nil {
					return err
				}
				dp, err := NewDataParallel(tr, c)
				if err != nil {
					return err
				}
				dp.BucketFloats = 37
				for k := 0; k < plan.Steps(); k++ {
					got, err := dp.Step(plan, k)
					if err != nil {
						return err
					}
					got.Row.WallS, want[k].Row.WallS = 0, 0
					if !reflect.DeepEqual(got.Row, want[k].Row) || got.GradNorm != want[k].GradNorm {
						return fmt.Errorf("step %d: row %+v, one process %+v", k, got.Row, want[k].Row)
					}
				}
				for _, name := range m.ParamNames() {
					a, w := m.Param(name), one.Param(name)
					for i := range a {
						if math.Float32bits(a[i]) != math.Float32bits(w[i]) {
							return fmt.Errorf("%s[%d] = %v, one process %v", name, i, a[i], w[i])
						}
					}
				}
				st := tr.Opt.State()
				ref := t1.Opt.State()
				states[r] = st.Steps
				for name := range st.Steps {
					if !dp.Owns(name) || !reflect.DeepEqual(st.ExpAvgSq[name], ref.ExpAvgSq[name]) || !reflect.DeepEqual(st.ExpAvg[name], ref.ExpAvg[name]) {
						return fmt.Errorf("moments of %s differ from the one-process ones (or not owned)", name)
					}
				}
				return nil
			}()
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	total := 0
	for _, s := range states {
		total += len(s)
	}
	if total != len(one.ParamNames()) {
		t.Errorf("the ranks hold the state of %d tensors together, the model has %d", total, len(one.ParamNames()))
	}
}

func TestPartition(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	// One huge tensor first: every rank still gets one.
	own, err := Partition(names, []int64{1000, 1, 1, 1, 1}, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"a": 0, "b": 1, "c": 2, "d": 3, "e": 3}
	if !reflect.DeepEqual(own, want) {
		t.Errorf("partition %v, want %v", own, want)
	}
	own, _ = Partition(names, []int64{1, 1, 1, 1, 4}, 2)
	if want := map[string]int{"a": 0, "b": 0, "c": 0, "d": 0, "e": 1}; !reflect.DeepEqual(own, want) {
		t.Errorf("partition %v, want %v", own, want)
	}
	if _, err := Partition(names, []int64{1, 1, 1, 1, 1}, 6); err == nil {
		t.Error("6 ranks for 5 tensors accepted")
	}
}
