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

// reportPolicy is emptyPolicy that reports a fixed KV cache for each call
// and records the calls' cache limits.
type reportPolicy struct {
	emptyPolicy
	rep    model.GenerateReport
	limits []int
}

func (p *reportPolicy) Generate(reqs []model.Request, o model.GenerateOptions) ([]*model.Generation, error) {
	p.limits = append(p.limits, o.CacheLimit)
	if o.Report != nil {
		*o.Report = p.rep
	}
	return p.emptyPolicy.Generate(reqs, o)
}

// TestGenerateSplitsByCacheRows: a later turn's contexts, which begin with
// the same task prompt, split under GenTokensPerCall into calls, each as
// large as fits (the task prompt kept once): before the run has generated
// a step, as if every sample wrote its MaxTokens (model.CacheRows, the
// calls' reservation); after steps of 10 tokens on average, as if each
// wrote 15 (a first slot: model.StartCacheRows), five requests where the
// reservation takes three. Each call gets the bound as its CacheLimit; the
// run's summary adds up what the calls report.
func TestGenerateSplitsByCacheRows(t *testing.T) {
	task := make([]int, 64)
	for i := range task {
		task[i] = i + 1
	}
	var reqs []model.Request
	for k := 0; k < 12; k++ {
		reqs = append(reqs, model.Request{Prompt: append(slices.Clone(task), 100+k, 200+k, 300+k, 400+k, 500+k)})
	}
	opts := model.GenerateOptions{MaxTokens: 100}
	limit := model.StartCacheRows(reqs[:5], opts)
	if whole := model.StartCacheRows(reqs[:5], model.GenerateOptions{MaxTokens: opts.MaxTokens, NoSharedPrefixes: true}); limit >= whole {
		t.Fatalf("the bound %d holds five whole contexts (%d): the case shares nothing", limit, whole)
	}
	first := model.GenerateOptions{MaxTokens: model.SlotRows(0, opts)}
	for _, c := range []struct {
		history Stats
		rows    model.GenerateOptions // what a call is packed by
		first   int
	}{{Stats{}, opts, 3}, {Stats{Steps: 12, GeneratedTokens: 120}, first, 5}} {
		pol := &reportPolicy{rep: model.GenerateReport{CacheRows: 700, PeakRows: 650, Preempted: 3}}
		log := &callLog{Policy: pol}
		e := &Engine{Policy: log, Opts: Options{GenTokensPerCall: limit}}
		st := c.history
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
		fits := func(call []model.Request) bool {
			return model.CacheRows(call, c.rows) <= limit && model.StartCacheRows(call, opts) <= limit
		}
		lo := 0
		for k, call := range log.calls {
			if !fits(call) {
				t.Errorf("%d steps before: call %d: %d requests do not fit %d rows", c.history.Steps, k, len(call), limit)
			}
			if end := lo + len(call); end < len(reqs) && fits(reqs[lo:end+1]) {
				t.Errorf("%d steps before: call %d: %d requests, one more would fit", c.history.Steps, k, len(call))
			}
			if pol.limits[k] != limit {
				t.Errorf("call %d: cache limit %d, want the bound %d", k, pol.limits[k], limit)
			}
			lo += len(call)
		}
		if len(log.calls[0]) != c.first {
			t.Errorf("%d steps before: first call: %d requests, want %d", c.history.Steps, len(log.calls[0]), c.first)
		}
		n := len(log.calls)
		if st.GenerateCalls != n || st.CacheRows != int64(700*n) || st.CacheRowsMax != 700 || st.CacheRowsPeak != 650 || st.Preempted != int64(3*n) {
			t.Errorf("stats: %d calls, %d cache rows, the largest %d, peak %d, %d preempted; %d calls made, each reporting %+v",
				st.GenerateCalls, st.CacheRows, st.CacheRowsMax, st.CacheRowsPeak, st.Preempted, n, pol.rep)
		}
	}
	// A policy that reports nothing is counted at what its calls reserve.
	log2 := &callLog{Policy: emptyPolicy{}}
	e := &Engine{Policy: log2, Opts: Options{GenTokensPerCall: limit}}
	st := Stats{}
	if _, err := e.generate(reqs, opts, &st); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, call := range log2.calls {
		total += model.CacheRows(call, opts)
	}
	if st.CacheRows != int64(total) || st.Preempted != 0 {
		t.Errorf("stats of a policy without reports: %d cache rows, %d preempted; want %d, 0", st.CacheRows, st.Preempted, total)
	}
}

// cacheRowsLog is a Policy that adds up, over its Generate calls, the KV
// cache rows each would take with every row's own copy of its prompt, with
// a request's samples sharing their prompt only, with beginnings shared
// too (the default), and, the default layout's rows growing as they write
// (model.GenerateOptions CacheLimit), what the call holds once every row
// has written its tokens with none preempted, and the largest call of each.
type cacheRowsLog struct {
	Policy
	total, peak [4]int
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
	gens, err := c.Policy.Generate(reqs, o)
	// Every row's first slot (the layout with that many new-token rows),
	// then each row's growth.
	v := model.GenerateOptions{MaxTokens: o.MaxTokens}
	n := model.CacheRows(reqs, model.GenerateOptions{MaxTokens: model.SlotRows(0, v)})
	for _, g := range gens {
		n += model.SlotRows(len(g.IDs), v) - model.SlotRows(0, v)
	}
	c.total[3] += n
	c.peak[3] = max(c.peak[3], n)
	return gens, err
}

// TestCacheRowsOfRealTurns measures the KV cache of a MemPO rollout's
// Generate calls on real data: HotpotQA tasks over their BM25 index, the
// Qwen3 tokenizer and chat template, the default agent (--keep 1, 1,024
// step tokens, observations up to 1,000), G = 16, every trajectory
// searching three times before it answers (scripted). A later turn's
// contexts share their task prompt; the default layout must take fewer
// rows than sharing samples' prompts only, which takes fewer than copies,
// and its rows growing as they write (the scripted steps are tens of
// tokens of the 1,024 reserved) fewer still.
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
	t.Logf("%d Generate calls (%d tasks × G = %d, 4 turns): KV-cache rows in all / of the largest call: copied prompts %d / %d; samples sharing their prompt %d / %d; beginnings shared too %d / %d; those rows growing as they write %d / %d",
		pol.calls, len(ts), G, pol.total[0], pol.peak[0], pol.total[1], pol.peak[1], pol.total[2], pol.peak[2], pol.total[3], pol.peak[3])
	if !(pol.total[3] < pol.total[2] && pol.total[2] < pol.total[1] && pol.total[1] < pol.total[0]) {
		t.Errorf("cache rows %v: sharing or growing slots save nothing", pol.total)
	}
}
