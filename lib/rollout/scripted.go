package rollout

import (
	"fmt"
	"strings"
	"time"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/model"
)

// Scripted is a Policy that writes given text instead of sampling from a
// model: the engine's tests and benchmarks use it to drive trajectories down
// known paths. Generate encodes Script's text for every row and ends it like
// a sampler would: at the first stop string (keeping the token that
// completes it), at MaxTokens ("length"), or with EOS when EOS ≥ 0 and the
// text has no stop string. Log-probs are made up but fixed by the ids.
type Scripted struct {
	Tok agent.Tokenizer
	// Script returns the output text of sample `sample` of a request, given
	// the decoded prompt and the request's seed.
	Script func(prompt string, sample int, seed uint64) string
	// EOS is appended to an output with no stop string (-1: none).
	EOS int
	// Delay is slept once per Generate call (a stand-in for a slow model).
	Delay time.Duration
	// LP computes LogProbs; nil uses FakeLogProbs.
	LP func(seqs [][]int) ([][]float32, error)
	// Calls counts Generate calls; Rows the rows generated.
	Calls, Rows int
}

// Generate implements Policy.
func (s *Scripted) Generate(reqs []model.Request, opts model.GenerateOptions) ([]*model.Generation, error) {
	s.Calls++
	if s.Delay > 0 {
		time.Sleep(s.Delay)
	}
	var out []*model.Generation
	for r, q := range reqs {
		if len(q.Prompt) == 0 {
			return nil, fmt.Errorf("scripted: request %d has an empty prompt", r)
		}
		prompt := s.Tok.Decode(q.Prompt)
		for i := 0; i < max(q.N, 1); i++ {
			s.Rows++
			text := s.Script(prompt, i, q.Seed)
			ids := s.Tok.Encode(text)
			g := &model.Generation{Request: r, Sample: i, Finish: "eos"}
			// Stop where a sampler would: the first prefix whose text holds
			// a stop string.
			stop := -1
			for n := 1; n <= len(ids) && stop < 0 && len(opts.StopStrings) > 0; n++ {
				t := s.Tok.Decode(ids[:n])
				for _, st := range opts.StopStrings {
					if strings.Contains(t, st) {
						stop = n
						break
					}
				}
			}
			switch {
			case stop >= 0:
				ids, g.Finish = ids[:stop], "stop"
			case s.EOS >= 0:
				ids = append(ids, s.EOS)
			}
			if opts.MaxTokens > 0 && len(ids) > opts.MaxTokens {
				ids, g.Finish = ids[:opts.MaxTokens], "length"
			}
			g.IDs = ids
			lp := FakeLogProbs([][]int{append(append([]int(nil), q.Prompt...), ids...)})[0][len(q.Prompt):]
			g.LogProbs = lp
			g.SampleLogProbs = make([]float32, len(lp))
			for k, x := range lp {
				g.SampleLogProbs[k] = x / 2
			}
			out = append(out, g)
		}
	}
	return out, nil
}

// LogProbs implements Policy.
func (s *Scripted) LogProbs(seqs [][]int) ([][]float32, error) {
	if s.LP != nil {
		return s.LP(seqs)
	}
	return FakeLogProbs(seqs), nil
}

// FakeLogProbs gives each id a log-prob in [−1, −0.01] fixed by the id and
// the one before it, laid out as Model.LogProbs (0 at position 0).
func FakeLogProbs(seqs [][]int) [][]float32 {
	out := make([][]float32, len(seqs))
	for i, seq := range seqs {
		lp := make([]float32, len(seq))
		for t := 1; t < len(seq); t++ {
			lp[t] = -float32((seq[t]*31+seq[t-1]*7)%100+1) / 100
		}
		out[i] = lp
	}
	return out
}
