package rollout

import (
	"testing"

	"github.com/mempo/mempo/lib/model"
)

// Progress is called while a turn's generation runs, not only when whole
// tasks finish: the first reports come with tokens pending, trajectories in
// flight and no task done yet, and the estimated fraction done grows.
func TestProgressWhileInFlight(t *testing.T) {
	ts, tok, m, ag, local := tinyTwoTurnSetup(t, 3)
	var seen []Stats
	e := &Engine{Agent: ag, Policy: m, Searcher: local, Opts: Options{GroupSize: 2, Batch: 4, Decode: tok.Decode,
		Seed: 5, Sampling: model.SampleParams{Temperature: 1}}}
	e.Progress = func(st Stats) { seen = append(seen, st) }
	run(t, e, jobsOf(ts))
	if len(seen) < 4 {
		t.Fatalf("%d progress calls", len(seen))
	}
	first := seen[0]
	if first.PendingTokens == 0 || first.InFlight != 4 || first.TasksDone != 0 || first.GroupSize != 2 {
		t.Errorf("first report %+v: want tokens pending, 4 in flight, no task done", first)
	}
	pending := 0
	for _, st := range seen {
		if st.PendingTokens > 0 {
			pending++
		}
	}
	last := seen[len(seen)-1]
	if pending < len(seen)/2 || last.TasksDone != 2 || last.Fraction(2) != 1 || !(seen[len(seen)/2].Fraction(2) > 0) {
		t.Errorf("%d of %d reports during generation; last %+v (fraction %v)", pending, len(seen), last, last.Fraction(2))
	}
}
