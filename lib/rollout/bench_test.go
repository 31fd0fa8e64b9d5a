package rollout

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/retrieval"
	"github.com/mempo/mempo/lib/testenv"
	"github.com/mempo/mempo/lib/tokenizer"
)

// BenchmarkRolloutTinyG16 runs the engine with G = 16 on the CPU: the tiny
// preset (Qwen2 shape, 151,936-id vocabulary, random weights) with the real
// Qwen tokenizer, 2 tasks, steps of at most 24 sampled tokens, 3 turns (random
// weights never write a valid step, so --on-invalid correct keeps every
// trajectory going to the turn limit). The reference, measured in the same
// run, is a bare Model.Generate of the same 16 first steps: the ratio
// gen-tok/s ÷ ref-tok/s is what the engine keeps of raw decoding speed.
func BenchmarkRolloutTinyG16(b *testing.B) {
	index, all := hotpot(b)
	tokPath := filepath.Join(testenv.RepoRoot(b), "testdata", "qwen3", "tokenizer.json")
	if p := os.Getenv("QWEN_TOKENIZER"); p != "" {
		tokPath = p
	}
	tk, err := tokenizer.Load(tokPath)
	if err != nil {
		b.Skipf("Qwen tokenizer %s: %v (run make fixtures-tokenizer)", tokPath, err)
	}
	tok := Tok{tk}
	cfg, err := checkpoint.Preset("tiny")
	if err != nil {
		b.Fatal(err)
	}
	m, err := model.New(cfg, checkpoint.RandomInit(cfg, 1), nil)
	if err != nil {
		b.Fatal(err)
	}
	acfg := agent.DefaultConfig()
	const G, stepTokens = 16, 24
	acfg.MaxTurns, acfg.MaxStepTokens, acfg.OnInvalid, acfg.EOSIDs = 3, stepTokens, agent.CorrectOnInvalid, m.EOS()
	ag, err := agent.New(acfg, tok)
	if err != nil {
		b.Fatal(err)
	}
	local, err := retrieval.NewLocal(index)
	if err != nil {
		b.Fatal(err)
	}
	defer local.Close()
	opts := Options{GroupSize: G, Batch: 2 * G, Decode: tok.Decode,
		Sampling: model.SampleParams{Temperature: 1, TopP: 1}, Seed: 1, MemoryReward: true}
	jobs := jobsOf(all[:2])

	// Reference: the first step of one task's 16 samples, bare; the best
	// of three runs (the first also warms up allocations and BLAS threads).
	refRate := 0.0
	for range 3 {
		t0 := time.Now()
		gens, err := m.Generate([]model.Request{{Prompt: append(ag.PromptIDs(jobs[0].Task.Questions), ag.GenPrompt()...), N: G, Seed: 1}},
			model.GenerateOptions{MaxTokens: stepTokens, Sampling: opts.Sampling, IgnoreEOS: true})
		if err != nil {
			b.Fatal(err)
		}
		refTok := 0
		for _, g := range gens {
			refTok += len(g.IDs)
		}
		refRate = max(refRate, float64(refTok)/time.Since(t0).Seconds())
	}

	b.ResetTimer()
	var st Stats
	for i := 0; i < b.N; i++ {
		e := &Engine{Agent: ag, Policy: m, Searcher: local, Opts: opts}
		st, err = e.Run(context.Background(), jobs, func(Job, []records.Rollout) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	sec := st.Wall.Seconds()
	rate := float64(st.GeneratedTokens) / sec
	b.ReportMetric(float64(st.Trajectories)/sec, "traj/s")
	b.ReportMetric(rate, "gen-tok/s")
	b.ReportMetric(refRate, "ref-tok/s")
	b.ReportMetric(rate/refRate, "ratio")
	b.ReportMetric(st.Reward.Seconds()/sec, "reward-share")
	b.ReportMetric(st.SearchShare(), "search-share")
}

// BenchmarkRolloutScriptedSearchG16 measures the engine and retrieval alone:
// a scripted policy (no model time) that searches once or twice, then answers,
// G = 16, 8 tasks, BM25 over the real HotpotQA paragraphs. search-share is
// the share of wall time spent waiting for retrieval.
func BenchmarkRolloutScriptedSearchG16(b *testing.B) {
	index, all := hotpot(b)
	tok := smallTok(b)
	ts := all[1:9] // not the first task: its sample 4 searches to the turn limit
	ag := newAgent(b, tok, nil)
	local, err := retrieval.NewLocal(index)
	if err != nil {
		b.Fatal(err)
	}
	defer local.Close()
	const G = 16
	script := scriptFor(ts)
	pol := &Scripted{Tok: tok, EOS: eosID, Script: func(p string, s int, seed uint64) string { return script(p, s%2, seed) }}
	opts := Options{GroupSize: G, Batch: 4 * G, Decode: tok.Decode}
	b.ResetTimer()
	var st Stats
	for i := 0; i < b.N; i++ {
		st, err = (&Engine{Agent: ag, Policy: pol, Searcher: local, Opts: opts}).Run(context.Background(), jobsOf(ts), func(Job, []records.Rollout) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	sec := st.Wall.Seconds()
	b.ReportMetric(float64(st.Trajectories)/sec, "traj/s")
	b.ReportMetric(float64(st.Searches)/st.Search.Seconds(), "queries/s")
	b.ReportMetric(st.SearchShare(), "search-share")
}
