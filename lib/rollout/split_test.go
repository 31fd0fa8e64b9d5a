package rollout

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/retrieval"
	"github.com/mempo/mempo/lib/testenv"
	"github.com/mempo/mempo/lib/tokenizer"
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
	var st Stats
	gens, err := e.generate(reqs, opts, &st)
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
	lo, total, largest := 0, 0, 0
	for c, call := range pol.calls {
		n := model.CacheRows(call, opts)
		total, largest = total+n, max(largest, n)
		if n > limit {
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
	// The run's summary counts what the calls took.
	if st.GenerateCalls != len(pol.calls) || st.CacheRows != int64(total) || st.CacheRowsMax != largest {
		t.Errorf("stats: %d calls, %d cache rows, the largest %d; the calls made: %d, %d, %d",
			st.GenerateCalls, st.CacheRows, st.CacheRowsMax, len(pol.calls), total, largest)
	}
}

// cacheRowsLog is a Policy that adds up, over its Generate calls, the KV
// cache rows each would take with every row's own copy of its prompt, with
// a request's samples sharing their prompt only, and with beginnings shared
// too (the default), and the largest call of each.
type cacheRowsLog struct {
	Policy
	total, peak [3]int
	calls       int
}

func (c *cacheRowsLog) Generate(reqs []model.Request, o model.GenerateOptions) ([]*model.Generation, error) {
	for i, v := range []model.GenerateOptions{{MaxTokens: o.MaxTokens, CopyPrompts: true, NoSharedPrefixes: true},
		{MaxTokens: o.MaxTokens, NoSharedPrefixes: true}, {MaxTokens: o.MaxTokens}} {
		n := model.CacheRows(reqs, v)
		c.total[i] += n
		c.peak[i] = max(c.peak[i], n)
	}
	c.calls++
	return c.Policy.Generate(reqs, o)
}

// TestCacheRowsOfRealTurns measures the KV cache of a MemPO rollout's
// Generate calls on real data: HotpotQA tasks over their BM25 index, the
// Qwen3 tokenizer and chat template, the default agent (--keep 1, 1,024
// step tokens, observations up to 1,000), G = 16, every trajectory
// searching three times before it answers (scripted). A later turn's
// contexts share their task prompt; the default layout must take fewer
// rows than sharing samples' prompts only, which takes fewer than copies.
func TestCacheRowsOfRealTurns(t *testing.T) {
	index, all := hotpot(t)
	ts := all[:8]
	tk, err := tokenizer.Load(filepath.Join(testenv.RepoRoot(t), "testdata", "qwen3", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tok := Tok{tk}
	ag, err := agent.New(agent.DefaultConfig(), tok)
	if err != nil {
		t.Fatal(err)
	}
	local, err := retrieval.NewLocal(index)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	script := func(prompt string, sample int, _ uint64) string {
		sample, turn := testenv.MarkedTurn(prompt, sample)
		for _, task := range ts {
			if q := task.Questions[0]; strings.Contains(prompt, q) {
				mem := testenv.MarkedMemory(sample, turn, strings.Repeat("a fact found so far; ", 1+(sample+turn)%5))
				if turn < 3 {
					return mem + "<think>I should look this up.</think><search>" + q + "</search>"
				}
				return mem + "<think>I know it.</think><answer>" + task.Golds[0][0] + "</answer>"
			}
		}
		return "no task found in the prompt"
	}
	const G = 16
	pol := &cacheRowsLog{Policy: &Scripted{Tok: tok, Script: script, EOS: -1}}
	e := &Engine{Agent: ag, Policy: pol, Searcher: local, Opts: Options{
		GroupSize: G, Batch: 4 * G, Decode: tok.Decode, Sampling: model.SampleParams{Temperature: 1, TopP: 1}, Seed: 3, PolicyID: "scripted",
	}}
	rows, _ := run(t, e, jobsOf(ts))
	if len(rows) != len(ts)*G {
		t.Fatalf("%d trajectories, want %d", len(rows), len(ts)*G)
	}
	t.Logf("%d Generate calls (%d tasks × G = %d, 4 turns): KV-cache rows in all / of the largest call: copied prompts %d / %d; samples sharing their prompt %d / %d; beginnings shared too %d / %d",
		pol.calls, len(ts), G, pol.total[0], pol.peak[0], pol.total[1], pol.peak[1], pol.total[2], pol.peak[2])
	if !(pol.total[2] < pol.total[1] && pol.total[1] < pol.total[0]) {
		t.Errorf("cache rows %v: sharing saves nothing", pol.total)
	}
}
