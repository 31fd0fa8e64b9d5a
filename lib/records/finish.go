package records

import (
	"github.com/mempo/mempo/lib/qa"
)

// Finish fills the fields of a trajectory that follow from its steps, its
// final answer text and its format check, so every stage derives them the
// same way:
//
//   - Answers: Answer split on ";" and trimmed (qa.SplitAnswers);
//   - FormatOK: cleared unless there are exactly k answers, none empty;
//   - EM, F1: per objective (a wrong answer count scores 0 everywhere),
//     under qa's default style (Search-R1's EM, SQuAD v1.1's F1);
//   - RewardTask: R^T, 1 when every objective exact-matches and FormatOK;
//   - Turns, TotalTokens, PeakTokens: from the steps' context and output
//     token counts (total = Σ, peak = max of context + output).
//
// Set Answer (from the final step only), FormatOK (the tag checks) and the
// steps' token counts before calling it.
func (r *Rollout) Finish() {
	answers, ok := qa.SplitAnswers(r.Answer, len(r.Golds))
	for _, a := range answers {
		if a == "" {
			ok = false
		}
	}
	r.Answers = answers
	if r.Answers == nil {
		r.Answers = []string{}
	}
	r.FormatOK = r.FormatOK && ok
	em, f1, all := qa.ScoreTask(answers, r.Golds, qa.SearchR1)
	r.EM, r.F1 = em, f1
	r.RewardTask = 0
	if all && r.FormatOK {
		r.RewardTask = 1
	}
	r.Turns = int32(len(r.Steps))
	r.TotalTokens, r.PeakTokens = 0, 0
	for i := range r.Steps {
		n := int64(r.Steps[i].ContextTokens) + int64(r.Steps[i].OutputTokens)
		r.TotalTokens += n
		r.PeakTokens = max(r.PeakTokens, n)
	}
}
