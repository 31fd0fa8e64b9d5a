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
//   - RewardTask: R^T of the kind "exact" (see FinishReward), 1 when every
//     objective exact-matches and FormatOK;
//   - Turns, TotalTokens, PeakTokens: from the steps' context and output
//     token counts (total = Σ, peak = max of context + output).
//
// Set Answer (from the final step only), FormatOK (the tag checks) and the
// steps' token counts before calling it.
func (r *Rollout) Finish() { r.FinishReward("exact") }

// TaskRewards are the kinds of R^T a rollout row can carry.
var TaskRewards = []string{"exact", "em", "f1"}

// FinishReward is Finish with R^T of the given kind: "" and "exact" give 1
// when every objective exact-matches and FormatOK, else 0 (the paper's);
// "em" and "f1" give the mean over objectives of the exact match or the
// token F1 (partial credit, the fractional variant of docs/ARCHITECTURE.md),
// 0 when FormatOK is false. A fractional reward gives a group variance when
// some of its trajectories answer part of a task, where the all-or-nothing
// reward is 0 for every one. An unknown kind is treated as "exact"; callers
// check flags against TaskRewards.
func (r *Rollout) FinishReward(kind string) {
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
	r.RewardTask = taskReward(kind, all, r.FormatOK, em, f1)
	r.Turns = int32(len(r.Steps))
	r.TotalTokens, r.PeakTokens = 0, 0
	for i := range r.Steps {
		n := int64(r.Steps[i].ContextTokens) + int64(r.Steps[i].OutputTokens)
		r.TotalTokens += n
		r.PeakTokens = max(r.PeakTokens, n)
	}
}

func taskReward(kind string, all, formatOK bool, em, f1 []float64) float64 {
	if !formatOK {
		return 0
	}
	var xs []float64
	switch kind {
	case "em":
		xs = em
	case "f1":
		xs = f1
	default:
		if all {
			return 1
		}
		return 0
	}
	return qa.Mean(xs)
}
