package agent

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MemorySeqs are the two teacher-forcing sequences of the memory reward of
// one step (docs/ARCHITECTURE.md, "Memory reward"; mempo-paper §2.2):
//
//	R^M_t = P(gold | q, mem_t) − P(gold | q, s_<t)
//
// where P is exp(mean log-prob) of the gold ids, teacher-forced. The engine
// runs the model over each sequence and averages the log-probs of the ids in
// [GoldStart, GoldEnd): the log-prob of the id at position p is read from the
// logits at position p−1.
type MemorySeqs struct {
	// Mem = prompt ⊕ generation prompt ⊕ the step's <mem>…</mem> ids (the
	// sampled ids of its MemStart:MemEnd span) ⊕ lead-in ⊕ gold under
	// ScoreInTurn; under ScoreNextStep the <mem> ids are a closed assistant
	// turn of their own, rendered as BuildContext renders a step without
	// observation, followed by the generation prompt, lead-in and gold.
	Mem                      []int
	MemGoldStart, MemGoldEnd int
	// Hist = prompt ⊕ every earlier step with its observation, rendered as
	// BuildContext renders them with KeepAll (nothing dropped) ⊕ generation
	// prompt ⊕ lead-in ⊕ gold. For the first step it is the prompt alone
	// ⊕ lead-in ⊕ gold: the no-context prior.
	Hist                       []int
	HistGoldStart, HistGoldEnd int
	Gold                       string // the gold answer text scored
	GoldIDs                    []int
	// GoldEnds, under Config.ScorePerObjective, holds for each objective j
	// the number of GoldIDs up to the end of its part of the gold ("a1",
	// then "a1; a2", …), so that objective j's ids are
	// GoldIDs[GoldEnds[j-1]:GoldEnds[j]]; nil otherwise.
	GoldEnds []int
}

// GoldText is the gold answer of a k-objective task as the policy would
// write it: the first (non-blank) alias of each objective, trimmed, joined
// with "; ". The paper does not say how multi-answer golds are scored; the
// first alias is the dataset's canonical answer, and scoring one fixed
// string keeps both terms of R^M comparable (a max over alias combinations
// would cost k-fold passes).
func GoldText(golds [][]string) (string, error) { return goldText(golds, false) }

// NumberedGoldText is GoldText with each part after its position's marker:
// "[1] Paris; [2] Berlin".
func NumberedGoldText(golds [][]string) (string, error) { return goldText(golds, true) }

func goldText(golds [][]string, numbered bool) (string, error) {
	if len(golds) == 0 {
		return "", fmt.Errorf("agent: no gold answers")
	}
	parts := make([]string, len(golds))
	for i, g := range golds {
		for _, alias := range g {
			if s := strings.TrimSpace(alias); s != "" {
				parts[i] = s
				break
			}
		}
		if parts[i] == "" {
			return "", fmt.Errorf("agent: objective %d has no gold alias", i+1)
		}
		if numbered {
			parts[i] = "[" + strconv.Itoa(i+1) + "] " + parts[i]
		}
	}
	return strings.Join(parts, "; "), nil
}

// MemorySequences builds the memory-reward sequences of step t (0-based) of
// a trajectory given by its prompt ids and its history. history[t].Output
// must hold the step's <mem> block at token span [memStart, memEnd) (from
// Parse); history[:t] is the raw past, observations included. gold is the
// answer text (see GoldText).
// k is the number of objectives, for a lead-in that names it (see
// Config.ScoreLeadIn).
func (a *Agent) MemorySequences(prompt []int, history []Turn, t, memStart, memEnd int, gold string, k int) (MemorySeqs, error) {
	if t < 0 || t >= len(history) {
		return MemorySeqs{}, fmt.Errorf("agent: step %d of a %d-step history", t, len(history))
	}
	out := history[t].Output
	if memStart < 0 || memEnd <= memStart || memEnd > len(out) {
		return MemorySeqs{}, fmt.Errorf("agent: step %d has no <mem> span (%d, %d)", t, memStart, memEnd)
	}
	leadIn := a.leadIn
	if strings.Contains(a.cfg.ScoreLeadIn, "{k}") {
		leadIn = a.tok.Encode(strings.ReplaceAll(a.cfg.ScoreLeadIn, "{k}", strconv.Itoa(k)))
	}
	g := a.tok.Encode(a.cfg.ScoreGoldPrefix + gold)
	if len(g) == 0 {
		return MemorySeqs{}, fmt.Errorf("agent: empty gold answer")
	}
	var s MemorySeqs
	s.Gold, s.GoldIDs = gold, g
	if a.cfg.ScorePerObjective {
		ends, err := a.GoldEnds(gold, g, k)
		if err != nil {
			return MemorySeqs{}, err
		}
		s.GoldEnds = ends
	}

	var m []int
	switch a.cfg.ScoreLayout {
	case ScoreNextStep:
		// The history term's template with the memory in the raw steps'
		// place: only what the memory holds differs between the two.
		m = a.render(prompt, []Turn{{Output: out[memStart:memEnd]}}, true)
	default:
		m = make([]int, 0, len(prompt)+len(a.asstOpen)+(memEnd-memStart)+len(leadIn)+len(g))
		m = append(m, prompt...)
		m = append(m, a.asstOpen...)
		m = append(m, out[memStart:memEnd]...)
	}
	m = append(m, leadIn...)
	s.MemGoldStart = len(m)
	m = append(m, g...)
	s.Mem, s.MemGoldEnd = m, len(m)

	h := a.render(prompt, history[:t], true)
	h = append(h, leadIn...)
	s.HistGoldStart = len(h)
	h = append(h, g...)
	s.Hist, s.HistGoldEnd = h, len(h)
	return s, nil
}

// GoldEnds splits the gold's ids g (of the text ScoreGoldPrefix + gold) at
// the ends of its k parts (GoldText joins them with "; "): the ids of each
// prefix of parts must be a prefix of g, or the parts cannot be scored apart
// within one pass and that is an error. MemorySequences sets
// MemorySeqs.GoldEnds with it under Config.ScorePerObjective.
func (a *Agent) GoldEnds(gold string, g []int, k int) ([]int, error) {
	parts := strings.Split(gold, "; ")
	if len(parts) != k {
		return nil, fmt.Errorf("agent: per-objective memory reward: gold %q has %d parts for %d objectives (an alias holds \"; \"?)", gold, len(parts), k)
	}
	ends := make([]int, k)
	for j := range parts {
		ids := a.tok.Encode(a.cfg.ScoreGoldPrefix + strings.Join(parts[:j+1], "; "))
		if len(ids) > len(g) || !slices.Equal(ids, g[:len(ids)]) || (j > 0 && len(ids) <= ends[j-1]) {
			return nil, fmt.Errorf("agent: per-objective memory reward: gold %q does not tokenize apart at objective %d", gold, j+1)
		}
		ends[j] = len(ids)
	}
	if ends[k-1] != len(g) {
		return nil, fmt.Errorf("agent: per-objective memory reward: gold %q: its parts cover %d of %d ids", gold, ends[k-1], len(g))
	}
	return ends, nil
}

// MemorySequences builds the memory-reward sequences of step t (0-based) of
// the trajectory against the task's gold aliases (see GoldText). It fails
// for a step without a complete <mem> block.
func (tr *Trajectory) MemorySequences(t int, golds [][]string) (MemorySeqs, error) {
	if t < 0 || t >= len(tr.Steps) {
		return MemorySeqs{}, fmt.Errorf("agent: step %d of a %d-step trajectory", t, len(tr.Steps))
	}
	gold, err := goldText(golds, tr.a.cfg.ScoreGoldNumbered)
	if err != nil {
		return MemorySeqs{}, err
	}
	st := tr.Steps[t]
	return tr.a.MemorySequences(tr.prompt, tr.history, t, st.MemStart, st.MemEnd, gold, len(golds))
}
