package rollout

import (
	"strings"
	"unicode"
)

// Forced search steps (Options.ForceSearchTurns) make a policy that does not
// search by itself — random weights of a real shape, for benchmarks — drive
// the whole loop: retrieval, observations and the memory rewards run as for a
// trained policy, at the real generation cost.
//
// A task's trajectories are forced for their first n steps, n drawn per task
// from 1..ForceSearchTurns by the run seed, so that tasks end at different
// turns as those of a trained policy do (the memory rewards of some then run
// while the searches of others are in flight, and freed slots are refilled);
// after them the policy's own steps follow (with random weights, invalid
// ones: they end the trajectory, or get the corrective message).
//
// A forced turn's request is the context followed by the ids of "<mem>"; the
// policy samples its step budget from there as usual (its text becomes the
// memory), and the engine then closes the step with "</mem><think></think>"
// and a search for the task's question followed by the first words of the
// sampled text (so the G samples of a task ask G different queries, as
// sampled policies do). The forced ids carry log-prob 0: under the forcing
// they have probability 1. A step whose sampled text itself breaks the format
// (a stray tag) stays invalid, as the protocol says.

// forcedWords is how many words of the sampled text follow the question.
const forcedWords = 4

// forced reports whether the trajectory's next step is forced.
func (e *Engine) forced(t *traj) bool {
	n := e.Opts.ForceSearchTurns
	if n <= 0 {
		return false
	}
	return t.tr.Turns < 1+int(mix64(e.Opts.Seed^0xf0ced, uint64(t.job.job.Group))%uint64(n))
}

// forcePrefix returns the ids put after a forced turn's context.
func (e *Engine) forcePrefix() []int { return e.Opts.Encode("<mem>") }

// forceStep turns the sampled ids of a forced turn into the step's output
// (prefix, sampled ids cut at a stop string or EOS, suffix), with the
// log-probs lined up.
func (e *Engine) forceStep(t *traj, ids []int, lp, slp []float32) ([]int, []float32, []float32) {
	o := e.Opts
	n := len(e.Agent.TrimToStop(ids))
	for i, id := range ids[:n] {
		if containsInt(e.Agent.Config().EOSIDs, id) {
			n = i
			break
		}
	}
	ids = ids[:n]
	qs := t.job.job.Task.Questions
	q := strings.Join(qs, " ")
	if len(qs) > 0 {
		q = qs[t.tr.Turns%len(qs)]
	}
	words := strings.FieldsFunc(o.Decode(ids), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	if len(words) > forcedWords {
		words = words[:forcedWords]
	}
	if len(words) > 0 {
		q += " " + strings.Join(words, " ")
	}
	tool := e.Agent.Config().ToolTag
	if tool == "" {
		tool = "search"
	}
	pre := e.forcePrefix()
	suf := o.Encode("</mem><think></think><" + tool + ">" + q + "</" + tool + ">")
	out := make([]int, 0, len(pre)+n+len(suf))
	out = append(append(append(out, pre...), ids...), suf...)
	pad := func(v []float32) []float32 {
		if v == nil {
			return nil
		}
		w := make([]float32, len(out))
		copy(w[len(pre):], v[:n])
		return w
	}
	return out, pad(lp), pad(slp)
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
