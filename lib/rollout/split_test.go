package rollout

import (
	"slices"
	"testing"

	"github.com/mempo/mempo/lib/model"
)

// emptyPolicy generates nothing for every row (the split is what is tested).
type emptyPolicy struct{}

func (emptyPolicy) Generate(reqs []model.Request, _ model.GenerateOptions) ([]*model.Generation, error) {
	var out []*model.Generation
	for r, q := range reqs {
		for s := 0; s < max(q.N, 1); s++ {
			out = append(out, &model.Generation{Request: r, Sample: s, Finish: "length"})
		}
	}
	return out, nil
}

func (emptyPolicy) LogProbs(seqs [][]int) ([][]float32, error) { return nil, nil }

// TestGenerateSplitsByCacheRows: a later turn's contexts, which begin with
// the same task prompt, split under GenTokensPerCall into calls whose KV
// cache (model.CacheRows: the task prompt kept once) fits the bound, each as
// large as fits; counting each context whole would let one into a call.
func TestGenerateSplitsByCacheRows(t *testing.T) {
	task := make([]int, 64)
	for i := range task {
		task[i] = i + 1
	}
	var reqs []model.Request
	for k := 0; k < 12; k++ {
		reqs = append(reqs, model.Request{Prompt: append(slices.Clone(task), 100+k, 200+k, 300+k, 400+k, 500+k)})
	}
	opts := model.GenerateOptions{MaxTokens: 8}
	limit := model.CacheRows(reqs[:5], opts)
	if whole := 2 * (len(reqs[0].Prompt) + opts.MaxTokens); limit >= whole {
		t.Fatalf("the bound %d holds two whole contexts (%d): the case shares nothing", limit, whole)
	}
	pol := &callLog{Policy: emptyPolicy{}}
	e := &Engine{Policy: pol, Opts: Options{GenTokensPerCall: limit}}
	gens, err := e.generate(reqs, opts, &Stats{})
	if err != nil {
		t.Fatal(err)
	}
	if len(gens) != len(reqs) {
		t.Fatalf("%d generations for %d requests", len(gens), len(reqs))
	}
	for i, g := range gens {
		if g.Request != i {
			t.Errorf("generation %d answers request %d", i, g.Request)
		}
	}
	lo := 0
	for c, call := range pol.calls {
		if n := model.CacheRows(call, opts); n > limit {
			t.Errorf("call %d: %d requests, %d cache rows > %d", c, len(call), n, limit)
		}
		if end := lo + len(call); end < len(reqs) && model.CacheRows(reqs[lo:end+1], opts) <= limit {
			t.Errorf("call %d: %d requests, one more would fit", c, len(call))
		}
		lo += len(call)
	}
	if len(pol.calls[0]) != 5 {
		t.Errorf("first call: %d requests, want 5", len(pol.calls[0]))
	}
}
