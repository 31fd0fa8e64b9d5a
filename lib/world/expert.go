package world

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/retrieval"
	"github.com/mempo/mempo/lib/rollout"
	"github.com/mempo/mempo/lib/tasks"
)

// Step is one expert step before rendering: memory, thought and either a
// query or an answer.
type Step struct {
	Mem, Think, Query, Answer string
	// Tool is the tool tag ("" means "search").
	Tool string
}

// StepText renders a step in the protocol's format:
// <mem>…</mem><think>…</think> then <search>q</search> or <answer>a</answer>.
func StepText(s Step) string {
	return agent.FormatStep(s.Tool, s.Mem, s.Think, s.Query, s.Answer)
}

// MemEntry is how the expert remembers the answer of question i: "[2]
// Oston", filed under the question's memory marker (see QuestionMarker).
func MemEntry(i int, answer string) string { return MemoryMarker(i) + " " + answer }

// PendingEntry is how the expert remembers a two-hop question half done: what
// is left of it, "[2] Travex city" once the employer of question 2's person
// is known to be Travex. The second lookup's query repeats it (see Query).
func PendingEntry(i int, entity, attr string) string {
	return MemoryMarker(i) + " " + entity + " " + attr
}

// NoMemory is the memory of the first step, before anything was found.
const NoMemory = "nothing found yet"

// Unknown is what a slot memory (Expert.Slots) holds for an objective not
// yet found: "[3] ?".
const Unknown = "?"

// Thoughts of the expert's steps. They are deliberately plain: a thought
// names the question the step works on by its number and whether the step is
// a two-hop question's second lookup, the two decisions a step makes, and
// carries nothing else; what varies besides is what the model must copy. A
// thought writes the bare number, not the marker: a marker in the thought
// would be one more place the query's marker matches (see QuestionMarker).

// ThinkSearch is the thought of the first lookup of question i.
func ThinkSearch(i int) string { return "look up " + strconv.Itoa(i) }

// ThinkSecondHop is the thought of the second lookup of two-hop question i,
// made from what the memory holds of it.
func ThinkSecondHop(i int) string { return "look up " + strconv.Itoa(i) + " from memory" }

// ThinkAnswer is the thought of the answer step of a k-objective task.
func ThinkAnswer(k int) string { return "all " + strconv.Itoa(k) + " answers are known" }

// ReadFact finds "The attr of entity is V." in an observation and returns V:
// the expert reads every answer from what retrieval returned, never from the
// world's tables.
func ReadFact(obs, attr, entity string) (string, bool) {
	re := regexp.MustCompile(`The ` + regexp.QuoteMeta(attr) + ` of ` + regexp.QuoteMeta(entity) + ` is ([^.\s]+(?: [^.\s]+)*)\.`)
	m := re.FindStringSubmatch(obs)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// Expert writes demonstration trajectories through the real protocol: the
// agent builds every context, retrieval answers every search, and the
// expert's outputs are encoded once and kept as ids, exactly as a sampled
// trajectory would be stored.
type Expert struct {
	Agent    *agent.Agent
	Tok      agent.Tokenizer
	Searcher retrieval.Searcher
	// DropRate is the lossy-memory knob (0: the perfect expert): the
	// probability that a step leaves the fact its lookup just returned out
	// of the next <mem> and repeats the lookup instead, as an agent that
	// forgot to file it would. The answer stays right and the repeat costs
	// one turn: the outcome reward hardly sees it, the memory reward should
	// (that step's memory lacks a fact its raw history holds). A drop is
	// made only while the task still fits the turn budget.
	DropRate float64
	// DropSeed seeds the drops; each (task, step) draws from a hash of the
	// seed, the task id and the step, so demonstrations are reproducible.
	DropSeed uint64
	// AnswerRate is the fraction of demonstrations AnswerRow makes an
	// answer-from-memory row of (0: none); drawn from DropSeed too.
	AnswerRate float64
	// AnswerMemory is the memory an answer row answers from.
	AnswerMemory AnswerMemory
	// Slots writes the memory with one entry per objective from the first
	// step on, in objective order, MemEntry(j, Unknown) until objective j
	// is found ("[1] Oston; [2] ?; [3] ?"), instead of the entries found so
	// far ("[1] Oston"; NoMemory before the first). Entry j then sits at
	// the same place in every memory of a task and in its answer, so that
	// answering from a memory is copying it in order, where the default
	// layout needs a lookup of [j] anywhere in the memory, which the demo's
	// tiny model does not learn past the first objectives. Measured, it did
	// not help that model: it read objective 1 only, and at PRESET=gpu the
	// cold start failed every task of k ≥ 4 (docs/DEMO.md, "What the scorer
	// copies"); off by default.
	Slots bool
}

// AnswerMemory picks the memory of an answer-from-memory row.
type AnswerMemory int

const (
	// AnswerStepMemory: the memory of one step of the demonstration,
	// drawn uniformly. Objectives are filed in order, so a late one is
	// in few of these memories, and a cold start trained on them copies
	// the first one or two objectives from a memory and guesses the rest
	// (docs/DEMO.md, "What the scorer copies").
	AnswerStepMemory AnswerMemory = iota
	// AnswerSubsetMemory: the demonstration's final memory with each
	// entry kept with probability 1/2 (in order; NoMemory when none is
	// kept), so that every objective is in half the rows whatever its
	// number, and answering it means finding its marker in the memory.
	AnswerSubsetMemory
)

// ParseAnswerMemory reads an AnswerMemory by its flag name.
func ParseAnswerMemory(s string) (AnswerMemory, error) {
	switch s {
	case "step":
		return AnswerStepMemory, nil
	case "subset":
		return AnswerSubsetMemory, nil
	}
	return 0, fmt.Errorf("answer memory %q: want step or subset", s)
}

// drop reports whether the step after step index si of the task leaves the
// fact out of memory.
func (e *Expert) drop(taskID string, si int) bool {
	if e.DropRate <= 0 {
		return false
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s\x00%d", e.DropSeed, taskID, si)
	return rand.New(rand.NewPCG(h.Sum64(), 0x6d656d70)).Float64() < e.DropRate
}

// ErrNotFound is wrapped by Run when retrieval did not return the fact a
// lookup needs; such a task gets no demonstration.
var ErrNotFound = fmt.Errorf("world: fact not retrieved")

// Plan is the expert's lookups for a task's questions: parsed back from the
// question texts, so the expert needs nothing but the task.
func Plan(questions []string) ([][]Fact, error) {
	single := regexp.MustCompile(`^(?:\(\d+\) )?(\w+) (\w+)\?$`)
	two := regexp.MustCompile(`^(?:\(\d+\) )?(\w+) employer (\w+)\?$`)
	var out [][]Fact
	for i, q := range questions {
		q = strings.TrimSpace(q)
		if m := two.FindStringSubmatch(q); m != nil {
			out = append(out, []Fact{{Entity: m[1], Attr: "employer"}, {Attr: m[2]}})
			continue
		}
		if m := single.FindStringSubmatch(q); m != nil {
			out = append(out, []Fact{{Entity: m[1], Attr: m[2]}})
			continue
		}
		return nil, fmt.Errorf("world: question %d %q is not a world question", i+1, q)
	}
	return out, nil
}

// Run writes one trajectory for the task: one search per lookup, the memory
// listing every answer found so far, and a final answer with all k answers.
// group is the row's group id.
func (e *Expert) Run(ctx context.Context, t tasks.Task, group int64) (records.Rollout, error) {
	start := time.Now()
	plan, err := Plan(t.Questions)
	if err != nil {
		return records.Rollout{}, err
	}
	tool := e.Agent.Config().ToolTag
	tr := e.Agent.NewTrajectory(t.Questions)
	var mem []string // the entries of objectives 1 … len(mem), in order
	memText := func() string {
		if e.Slots {
			all := slices.Clone(mem)
			for j := len(mem); j < len(plan); j++ {
				all = append(all, MemEntry(j+1, Unknown))
			}
			return strings.Join(all, "; ")
		}
		if len(mem) == 0 {
			return NoMemory
		}
		return strings.Join(mem, "; ")
	}
	step := func(s Step) (agent.StepResult, error) {
		s.Tool = tool
		res, err := tr.Step(e.Tok.Encode(StepText(s)), nil)
		if err != nil {
			return res, err
		}
		if !res.Valid {
			return res, fmt.Errorf("world: expert step is invalid (%s): %q", res.Reason, StepText(s))
		}
		return res, nil
	}
	left := 0 // lookups not yet filed in memory
	for _, lookups := range plan {
		left += len(lookups)
	}
	for qi, lookups := range plan {
		n := qi + 1
		entity := lookups[0].Entity
		for h := 0; h < len(lookups); h++ {
			lk := lookups[h]
			think, q := ThinkSearch(n), Query(QuestionMarker(n), entity, lk.Attr)
			if h > 0 {
				think, q = ThinkSecondHop(n), Query(MemoryMarker(n), entity, lk.Attr)
			}
			res, err := step(Step{Mem: memText(), Think: think, Query: q})
			if err != nil {
				return records.Rollout{}, err
			}
			if !res.NeedSearch {
				return records.Rollout{}, fmt.Errorf("world: task %s: turn budget of %d spent before question %d was answered", t.TaskID, e.Agent.Config().MaxTurns, n)
			}
			hits, err := e.Searcher.Search(ctx, []string{q}, e.Agent.Config().TopK)
			if err != nil {
				return records.Rollout{}, err
			}
			docs := make([]agent.Doc, len(hits[0]))
			for i, h := range hits[0] {
				docs[i] = agent.Doc{ID: h.ID, Title: h.Title, Contents: h.Contents, Score: h.Score}
			}
			if err := tr.Observe(docs); err != nil {
				return records.Rollout{}, err
			}
			v, ok := ReadFact(tr.Steps[len(tr.Steps)-1].ObsText, lk.Attr, entity)
			if !ok {
				return records.Rollout{}, fmt.Errorf("%w: task %s: %q", ErrNotFound, t.TaskID, q)
			}
			// A lossy expert forgets to file the fact and repeats the
			// lookup: the next step's memory is this one's, its thought and
			// query the same. Only while the steps taken, the repeat, the
			// lookups left after it and the answer fit the turn budget.
			if taken := len(tr.Steps); taken+left+1 <= e.Agent.Config().MaxTurns && e.drop(t.TaskID, taken) {
				h--
				continue
			}
			left--
			lookups[h].Entity, lookups[h].Value = entity, v
			entity = v
			// The memory holds what is left of the question: the answer,
			// or after a two-hop question's first lookup the entity and
			// the attribute still to look up.
			entry := MemEntry(n, v)
			if h+1 < len(lookups) {
				entry = PendingEntry(n, v, lookups[h+1].Attr)
			}
			if h == 0 {
				mem = append(mem, entry)
			} else {
				mem[len(mem)-1] = entry
			}
		}
	}
	// The answer is the memory's entries, markers included ("[1] Quovex;
	// [2] Oston"; the answer checker reads a part numbered with its own
	// position without the number): written after the marker it has just
	// written, each answer is a copy of the ids that follow that marker in
	// the memory.
	if _, err := step(Step{Mem: memText(), Think: ThinkAnswer(len(plan)), Answer: memText()}); err != nil {
		return records.Rollout{}, err
	}
	if !tr.Done() || !tr.FormatOK {
		return records.Rollout{}, fmt.Errorf("world: task %s: expert trajectory ended without a well-formed answer (%s)", t.TaskID, tr.Failure)
	}
	return rollout.Record(tr, t, group, e.Agent.Config().Keep, "expert", time.Since(start)), nil
}

// answer reports whether demonstration taskID gives an answer row, and from
// which of its n steps; the generator goes on to draw a subset memory.
func (e *Expert) answer(taskID string, n int) (int, *rand.Rand, bool) {
	if e.AnswerRate <= 0 || n == 0 {
		return 0, nil, false
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "answer\x00%d\x00%s", e.DropSeed, taskID)
	r := rand.New(rand.NewPCG(h.Sum64(), 0x616e7377))
	if r.Float64() >= e.AnswerRate {
		return 0, nil, false
	}
	return r.IntN(n), r, true
}

// subsetMemory returns the <mem> block holding each entry of memory block
// mem (its text, tags included) with probability 1/2, in order; with slots,
// an entry left out is its objective's MemEntry(j, Unknown) instead.
func subsetMemory(mem string, slots bool, r *rand.Rand) (string, error) {
	inner, ok := strings.CutPrefix(mem, "<mem>")
	if ok {
		inner, ok = strings.CutSuffix(inner, "</mem>")
	}
	if !ok {
		return "", fmt.Errorf("memory %q is not a <mem> block", mem)
	}
	var kept []string
	for j, e := range strings.Split(inner, "; ") {
		switch {
		case e != NoMemory && r.IntN(2) == 0:
			kept = append(kept, e)
		case slots:
			kept = append(kept, MemEntry(j+1, Unknown))
		}
	}
	if len(kept) == 0 {
		kept = []string{NoMemory}
	}
	return "<mem>" + strings.Join(kept, "; ") + "</mem>", nil
}

// AnswerRow is the memory reward's scoring sequence made a demonstration:
// for one step of the expert's trajectory r, drawn per task (AnswerRate of
// the tasks have one, from a step drawn uniformly; under AnswerSubsetMemory
// the final step with a subset of its memory's entries), a one-step row whose
// context is the sequence agent.MemorySequences scores P(gold | q, mem_t) on
// up to the gold (the prompt, the step's memory in the agent's ScoreLayout,
// the lead-in) and whose output is the gold answer and "</answer>". A policy
// trained only on protocol steps has never answered from a memory placed
// there (docs/DEMO.md, "Making R^M rank memories"); these rows teach it to
// answer from what the memory holds, so that P(gold | mem) ranks memories.
// The memory is context, never a target: the rows do not teach writing a
// memory. ok is false for a task drawn to have none.
func (e *Expert) AnswerRow(r records.Rollout) (row records.Rollout, ok bool, err error) {
	t, draw, ok := e.answer(r.TaskID, len(r.Steps))
	if !ok {
		return records.Rollout{}, false, nil
	}
	recs := rollout.StepRecords(&r)
	history := make([]agent.Turn, len(recs))
	for i, s := range recs {
		history[i] = agent.Turn{Output: s.OutputIDs, Obs: s.ObsIDs}
	}
	gold, err := agent.GoldText(r.Golds)
	if e.Agent.Config().ScoreGoldNumbered {
		gold, err = agent.NumberedGoldText(r.Golds)
	}
	if err != nil {
		return records.Rollout{}, false, fmt.Errorf("world: task %s: %w", r.TaskID, err)
	}
	st := recs[t]
	memStart, memEnd := st.MemStart, st.MemEnd
	if e.AnswerMemory == AnswerSubsetMemory {
		last := recs[len(recs)-1]
		mem, err := subsetMemory(e.Tok.Decode(last.OutputIDs[last.MemStart:last.MemEnd]), e.Slots, draw)
		if err != nil {
			return records.Rollout{}, false, fmt.Errorf("world: task %s: %w", r.TaskID, err)
		}
		// The scoring sequence reads only step t's output (and the
		// history before it, for the raw-history term, unused here).
		t = len(recs) - 1
		history[t] = agent.Turn{Output: e.Tok.Encode(mem)}
		memStart, memEnd = 0, len(history[t].Output)
	}
	seq, err := e.Agent.MemorySequences(e.Agent.PromptIDs(r.Questions), history, t, memStart, memEnd, gold, len(r.Golds))
	if err != nil {
		return records.Rollout{}, false, fmt.Errorf("world: task %s: %w", r.TaskID, err)
	}
	ctx := records.IDs32(seq.Mem[:seq.MemGoldStart])
	out := records.IDs32(append(append([]int(nil), seq.GoldIDs...), e.Tok.Encode("</answer>")...))
	row = r
	row.Policy = "expert-answer"
	row.Steps = []records.Step{{
		ContextIDs: ctx, OutputIDs: out, MemStart: -1, MemEnd: -1, Action: "answer",
		ContextTokens: int32(len(ctx)), OutputTokens: int32(len(out)),
	}}
	row.Turns = 1
	row.TotalTokens = int64(len(ctx) + len(out))
	row.PeakTokens = row.TotalTokens
	return row, true, nil
}
