package model

import (
	"slices"
	"testing"
)

// steppingCPU is the CPU backend with a stepper that runs the op-by-op step
// (lastLogits, then Sample) from the arguments Generate passes it, so that
// the stepper path of Generate (what it hands the CUDA graphs) is checked on
// any machine: it must give exactly what the loop without a stepper gives.
type steppingCPU struct {
	*CPU
	steps, made, freed int
}

type cpuTestStepper struct {
	be *steppingCPU
	m  *Model
	c  *kvCache
}

func (b *steppingCPU) newStepper(m *Model, c *kvCache, rows int) stepper {
	b.made++
	return &cpuTestStepper{b, m, c}
}

func (s *cpuTestStepper) step(ids []int, seqs []AttnSeq, params []SampleParams, u []float64) []Sampled {
	s.be.steps++
	logits := s.m.stepLogits(s.c, ids, seqs)
	defer s.m.free(logits)
	return s.be.Sample(logits, params, u)
}

func (s *cpuTestStepper) free() { s.be.freed++ }

func TestGenerateWithStepper(t *testing.T) {
	plain := loadFixture(t, "qwen2-untied-gqa4")
	sb := &steppingCPU{CPU: NewCPU()}
	stepping := loadFixtureOn(t, "qwen2-untied-gqa4", sb)
	reqs := []Request{{Prompt: []int{5, 17, 99, 230, 8}, N: 3, Seed: 4}, {Prompt: []int{300, 2}, N: 2, Seed: 5}}
	for _, opts := range []GenerateOptions{
		{MaxTokens: 12, IgnoreEOS: true},
		{MaxTokens: 12, Sampling: SampleParams{Temperature: 0.9, TopK: 20}, EOS: []int{7, 11, 13}},
	} {
		var wantTok, gotTok int
		opts.OnTokens = func(n int) { wantTok += n }
		want, err := plain.Generate(reqs, opts)
		if err != nil {
			t.Fatal(err)
		}
		sb.made, sb.freed, sb.steps = 0, 0, 0
		opts.OnTokens = func(n int) { gotTok += n }
		got, err := stepping.Generate(reqs, opts)
		if err != nil {
			t.Fatal(err)
		}
		if gotTok != wantTok || gotTok == 0 {
			t.Errorf("OnTokens reported %d tokens with the stepper, %d without", gotTok, wantTok)
		}
		if sb.made != 1 || sb.freed != 1 || sb.steps == 0 {
			t.Fatalf("stepper made %d times, freed %d, %d steps", sb.made, sb.freed, sb.steps)
		}
		for i := range want {
			if !slices.Equal(got[i].IDs, want[i].IDs) || got[i].Finish != want[i].Finish || !equalF32(got[i].LogProbs, want[i].LogProbs) ||
				!equalF32(got[i].SampleLogProbs, want[i].SampleLogProbs) {
				t.Fatalf("row %d: with the stepper %v (%s), without %v (%s)", i, got[i].IDs, got[i].Finish, want[i].IDs, want[i].Finish)
			}
		}
	}
}

// With a LoRA adapter attached, Generate takes the op-by-op path (a
// stepper runs the base layers only) and gives what the CPU backend gives.
func TestGenerateWithAdapterSkipsStepper(t *testing.T) {
	cfg := tinyConfig(false)
	plain, _ := loraModel(t, cfg, NewCPU(), 11, allTargets(3, 6, 0))
	sb := &steppingCPU{CPU: NewCPU()}
	stepping, _ := loraModel(t, cfg, sb, 11, allTargets(3, 6, 0))
	reqs := []Request{{Prompt: []int{1, 5, 7, 2}, N: 2, Seed: 3}}
	opts := GenerateOptions{MaxTokens: 6, IgnoreEOS: true}
	want, err := plain.Generate(reqs, opts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := stepping.Generate(reqs, opts)
	if err != nil {
		t.Fatal(err)
	}
	if sb.made != 0 {
		t.Fatalf("a stepper was made for a model with an adapter")
	}
	for i := range want {
		if !slices.Equal(got[i].IDs, want[i].IDs) || !equalF32(got[i].LogProbs, want[i].LogProbs) {
			t.Fatalf("row %d: %v, want %v", i, got[i].IDs, want[i].IDs)
		}
	}
}
