package rollout

import (
	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/tokenizer"
)

// Tok adapts a *tokenizer.Tokenizer to agent.Tokenizer. Decode keeps special
// tokens and leaves out ids the tokenizer does not know (a model's embedding
// matrix is often padded past the vocabulary, and a sampler may pick them).
type Tok struct{ T *tokenizer.Tokenizer }

// Encode implements agent.Tokenizer.
func (t Tok) Encode(s string) []int { return t.T.Encode(s) }

// Decode implements agent.Tokenizer.
func (t Tok) Decode(ids []int) string {
	known := ids
	for i, id := range ids {
		if _, err := t.T.TokenBytes(id); err != nil {
			// Copy only when there is something to leave out.
			known = append([]int(nil), ids[:i]...)
			for _, id := range ids[i+1:] {
				if _, err := t.T.TokenBytes(id); err == nil {
					known = append(known, id)
				}
			}
			break
		}
	}
	s, _ := t.T.Decode(known)
	return s
}

// StepRecords turns the steps of a stored row back into lib/agent's step
// records, enough for Agent.CheckRecord to verify every stored context.
func StepRecords(r *records.Rollout) []agent.StepRecord {
	out := make([]agent.StepRecord, len(r.Steps))
	for i, s := range r.Steps {
		out[i] = agent.StepRecord{
			ContextIDs: records.IDs(s.ContextIDs), OutputIDs: records.IDs(s.OutputIDs), Logprobs: s.Logprobs,
			MemStart: int(s.MemStart), MemEnd: int(s.MemEnd), ObsIDs: records.IDs(s.ObsIDs),
			ContextTokens: int(s.ContextTokens), OutputTokens: int(s.OutputTokens),
			Query: s.Query, DocIDs: s.DocIDs,
		}
		if len(s.Logprobs) == 0 {
			out[i].Logprobs = nil
		}
	}
	return out
}
