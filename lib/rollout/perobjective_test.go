package rollout

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/retrieval"
	"github.com/mempo/mempo/lib/rl"
	"github.com/mempo/mempo/lib/tasks"
)

// oneHit answers every query with the same passage.
type oneHit struct{}

func (oneHit) Search(_ context.Context, qs []string, k int) ([][]retrieval.Hit, error) {
	out := make([][]retrieval.Hit, len(qs))
	for i := range qs {
		out[i] = []retrieval.Hit{{ID: "1", Title: "Paris", Contents: "\"Paris\"\nParis is the capital of France."}}
	}
	return out, nil
}

// Under agent.Config.ScorePerObjective each memory term is the mean over
// the two objectives of the geometric-mean probability of each one's gold
// ids, cut out of the same teacher-forced pass (FakeLogProbs by hand);
// without it, the geometric mean over the joint gold.
func TestPerObjectiveMemoryReward(t *testing.T) {
	tok := smallTok(t)
	task := tasks.Task{TaskID: "two", Questions: []string{"Capital of France?", "Capital of Burgundy?"},
		Golds: [][]string{{"Paris"}, {"Dijon"}}}
	script := func(prompt string, _ int, _ uint64) string {
		if !strings.Contains(prompt, "<search>capital of France</search>") {
			return "<mem>nothing yet</mem><think>look</think><search>capital of France</search>"
		}
		return "<mem>Paris; Dijon</mem><think>done</think><answer>Paris; Dijon</answer>"
	}
	gold := "Paris; Dijon"
	g := tok.Encode(gold)
	ends := []int{len(tok.Encode("Paris")), len(g)}
	lead := tok.Encode(agent.DefaultScoreLeadIn)
	joint := func(lp []float32) float64 { p, _ := rl.GeoMeanProb(lp); return p }
	perObjective := func(lp []float32) float64 {
		p, err := rl.MultiGoldProb([][][]float32{{lp[:ends[0]]}, {lp[ends[0]:]}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, per := range []bool{false, true} {
		ag := newAgent(t, tok, func(c *agent.Config) { c.ScorePerObjective = per })
		e := &Engine{Agent: ag, Policy: &Scripted{Tok: tok, Script: script, EOS: eosID}, Searcher: oneHit{}, Opts: Options{
			GroupSize: 1, Batch: 1, Decode: tok.Decode, MemoryReward: true,
		}}
		rows, _ := run(t, e, []Job{{Task: task}})
		r := rows[0]
		if len(r.Steps) != 2 || r.RewardTask != 1 {
			t.Fatalf("per-objective %v: %d steps, R^T %v", per, len(r.Steps), r.RewardTask)
		}
		prob := joint
		if per {
			prob = perObjective
		}
		for i, s := range r.Steps {
			out := records.IDs(s.OutputIDs)
			mem := append(append(append(records.IDs(r.Steps[0].ContextIDs), out[s.MemStart:s.MemEnd]...), lead...), g...)
			hist := append(append(records.IDs(s.ContextIDs), lead...), g...) // keep 1, two steps: the context is the raw history
			pm := prob(FakeLogProbs([][]int{mem})[0][len(mem)-len(g):])
			ph := prob(FakeLogProbs([][]int{hist})[0][len(hist)-len(g):])
			if s.PGoldMem == nil || math.Abs(*s.PGoldMem-pm) > 1e-12 || math.Abs(*s.PGoldHist-ph) > 1e-12 {
				t.Errorf("per-objective %v, step %d: p_mem %v p_hist %v, by hand %v %v", per, i, s.PGoldMem, s.PGoldHist, pm, ph)
			}
			// Per objective, each term is stored too: the geometric means
			// of Paris's and of Dijon's ids.
			if !per {
				if len(s.PGoldMemObj) != 0 || len(s.PGoldHistObj) != 0 {
					t.Errorf("joint scoring, step %d: per-objective terms %v %v stored", i, s.PGoldMemObj, s.PGoldHistObj)
				}
				continue
			}
			for k, c := range []struct {
				got []float64
				seq []int
			}{{s.PGoldMemObj, mem}, {s.PGoldHistObj, hist}} {
				lp := FakeLogProbs([][]int{c.seq})[0][len(c.seq)-len(g):]
				a, _ := rl.GeoMeanProb(lp[:ends[0]])
				b, _ := rl.GeoMeanProb(lp[ends[0]:])
				if len(c.got) != 2 || math.Abs(c.got[0]-a) > 1e-12 || math.Abs(c.got[1]-b) > 1e-12 || math.Abs(a-b) < 1e-6 {
					t.Errorf("step %d, %s: per-objective terms %v, by hand [%v %v]", i, [...]string{"memory", "history"}[k], c.got, a, b)
				}
			}
		}
		// The two forms differ here, so the check above tells them apart.
		if lp := FakeLogProbs([][]int{g})[0]; math.Abs(joint(lp)-perObjective(lp)) < 1e-6 {
			t.Fatal("the joint and per-objective forms agree on these ids: the test cannot tell them apart")
		}
	}
}

// halfLogProbs is a scorer other than the policy: FakeLogProbs halved.
type halfLogProbs struct{}

func (halfLogProbs) LogProbs(seqs [][]int) ([][]float32, error) {
	lps := FakeLogProbs(seqs)
	for _, lp := range lps {
		for i := range lp {
			lp[i] /= 2
		}
	}
	return lps, nil
}

// With Engine.Scorer set, the memory terms are the scorer's, not the
// policy's (by hand, against both).
func TestSeparateScorer(t *testing.T) {
	tok := smallTok(t)
	task := tasks.Task{TaskID: "one", Questions: []string{"Capital of France?"}, Golds: [][]string{{"Paris"}}}
	script := func(prompt string, _ int, _ uint64) string {
		if !strings.Contains(prompt, "<search>capital of France</search>") {
			return "<mem>nothing yet</mem><think>look</think><search>capital of France</search>"
		}
		return "<mem>Paris</mem><think>done</think><answer>Paris</answer>"
	}
	ag := newAgent(t, tok, nil)
	e := &Engine{Agent: ag, Policy: &Scripted{Tok: tok, Script: script, EOS: eosID}, Scorer: halfLogProbs{}, Searcher: oneHit{},
		Opts: Options{GroupSize: 1, Batch: 1, Decode: tok.Decode, MemoryReward: true}}
	rows, _ := run(t, e, []Job{{Task: task}})
	g, lead := tok.Encode("Paris"), tok.Encode(agent.DefaultScoreLeadIn)
	for i, s := range rows[0].Steps {
		out := records.IDs(s.OutputIDs)
		mem := append(append(append(records.IDs(rows[0].Steps[0].ContextIDs), out[s.MemStart:s.MemEnd]...), lead...), g...)
		half, _ := halfLogProbs{}.LogProbs([][]int{mem})
		want, _ := rl.GeoMeanProb(half[0][len(mem)-len(g):])
		policy, _ := rl.GeoMeanProb(FakeLogProbs([][]int{mem})[0][len(mem)-len(g):])
		if s.PGoldMem == nil || math.Abs(*s.PGoldMem-want) > 1e-12 || math.Abs(want-policy) < 1e-6 {
			t.Errorf("step %d: p_mem %v, the scorer's %v, the policy's %v", i, s.PGoldMem, want, policy)
		}
	}
}
