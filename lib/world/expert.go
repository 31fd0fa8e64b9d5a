package world

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/retrieval"
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
	tool := s.Tool
	if tool == "" {
		tool = "search"
	}
	t := "<mem>" + s.Mem + "</mem><think>" + s.Think + "</think>"
	if s.Query != "" {
		return t + "<" + tool + ">" + s.Query + "</" + tool + ">"
	}
	return t + "<answer>" + s.Answer + "</answer>"
}

// MemEntry is how the expert remembers the answer of question i: "(2)
// Oston", filed under the question's number (see Numbered).
func MemEntry(i int, answer string) string { return "(" + strconv.Itoa(i) + ") " + answer }

// NoMemory is the memory of the first step, before anything was found.
const NoMemory = "nothing found yet"

// Thoughts of the expert's steps. They are deliberately plain: a thought
// names the question the step works on by its number and carries nothing
// else, so that what a from-scratch model must work out (which question is
// next, whether it needs a second lookup) is written down in one place and
// what it must copy (names into queries, answers into memory) is all that
// varies besides.

// ThinkSearch is the thought of the first lookup of question i.
func ThinkSearch(i int) string { return "(" + strconv.Itoa(i) + ")" }

// ThinkSecondHop is the thought of the second lookup of two-hop question i,
// for attribute attr of the employer just found.
func ThinkSecondHop(i int, attr string) string {
	return "(" + strconv.Itoa(i) + ") then its " + attr
}

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
	// Keep is copied into the rows ("1", "all", …).
	Keep string
}

// ErrNotFound is wrapped by Run when retrieval did not return the fact a
// lookup needs; such a task gets no demonstration.
var ErrNotFound = fmt.Errorf("world: fact not retrieved")

// Plan is the expert's lookups for a task's questions: parsed back from the
// question texts, so the expert needs nothing but the task.
func Plan(questions []string) ([][]Fact, error) {
	single := regexp.MustCompile(`^(?:\(\d+\) )?What is the (\w+) of (\w+)\?$`)
	two := regexp.MustCompile(`^(?:\(\d+\) )?What is the (\w+) of the employer of (\w+)\?$`)
	var out [][]Fact
	for i, q := range questions {
		q = strings.TrimSpace(q)
		if m := two.FindStringSubmatch(q); m != nil {
			out = append(out, []Fact{{Entity: m[2], Attr: "employer"}, {Attr: m[1]}})
			continue
		}
		if m := single.FindStringSubmatch(q); m != nil {
			out = append(out, []Fact{{Entity: m[2], Attr: m[1]}})
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
	var mem []string
	memText := func() string {
		if len(mem) == 0 {
			return NoMemory
		}
		return strings.Join(mem, "; ")
	}
	var answers []string
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
	for qi, lookups := range plan {
		entity := lookups[0].Entity
		for h, lk := range lookups {
			think := ThinkSearch(qi + 1)
			if h > 0 {
				think = ThinkSecondHop(qi+1, lk.Attr)
			}
			q := Query(lk.Attr, entity)
			res, err := step(Step{Mem: memText(), Think: think, Query: q})
			if err != nil {
				return records.Rollout{}, err
			}
			if !res.NeedSearch {
				return records.Rollout{}, fmt.Errorf("world: task %s: turn budget of %d spent before question %d was answered", t.TaskID, e.Agent.Config().MaxTurns, qi+1)
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
			lookups[h].Entity, lookups[h].Value = entity, v
			entity = v
		}
		answers = append(answers, entity)
		mem = append(mem, MemEntry(qi+1, entity))
	}
	// The answer starts with a space, as each answer does in the memory
	// ("(1) Quovex"): the answer then repeats the memory's ids (" Quovex" and
	// "Quovex" are different ids), so writing it is a plain copy.
	if _, err := step(Step{Mem: memText(), Think: ThinkAnswer(len(plan)), Answer: " " + strings.Join(answers, "; ")}); err != nil {
		return records.Rollout{}, err
	}
	if !tr.Done() || !tr.FormatOK {
		return records.Rollout{}, fmt.Errorf("world: task %s: expert trajectory ended without a well-formed answer (%s)", t.TaskID, tr.Failure)
	}
	return Record(tr, t, group, e.Keep, "expert", time.Since(start)), nil
}

// Record turns a finished trajectory into a rollouts row (docs/formats.md),
// filled the way the rollout stage fills its rows: ids as stored, no
// log-probs (a demonstration was not sampled), greedy sampling settings.
func Record(tr *agent.Trajectory, t tasks.Task, group int64, keep, policy string, wall time.Duration) records.Rollout {
	r := records.Rollout{
		TaskID: t.TaskID, DataSource: t.DataSource, K: int32(len(t.Questions)), Prompt: t.Prompt,
		Questions: append([]string(nil), t.Questions...), Golds: t.Golds,
		Group: group, Policy: policy, Keep: keep, TopP: 1,
		Answer: tr.AnswerText, FormatOK: tr.FormatOK, WallS: max(wall.Seconds(), 1e-9),
	}
	if r.Prompt == "" {
		r.Prompt = strings.Join(t.Questions, "; ")
	}
	switch tr.Failure {
	case agent.FailMaxTurns:
		r.Failure = "no_answer"
	case agent.FailFormat:
		r.Failure = "bad_format"
	}
	for i, s := range tr.Steps {
		st := records.Step{
			Index: int32(i), ContextIDs: to32(s.ContextIDs), OutputIDs: to32(s.OutputIDs),
			MemStart: int32(s.MemStart), MemEnd: int32(s.MemEnd),
			Action: s.Action, Query: s.Query, DocIDs: s.DocIDs, Finish: "stop",
			ContextTokens: int32(s.ContextTokens), OutputTokens: int32(s.OutputTokens),
			ObsIDs: to32(s.ObsIDs), InfoText: s.ObsText, OutputText: s.Text,
		}
		if !s.Valid {
			st.Action = "invalid"
		}
		if st.DocIDs == nil {
			st.DocIDs = []string{}
		}
		r.Steps = append(r.Steps, st)
	}
	r.Finish()
	return r
}

func to32(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}
