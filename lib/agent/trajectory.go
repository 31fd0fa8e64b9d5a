package agent

import (
	"errors"
	"fmt"

	"github.com/mempo/mempo/lib/qa"
)

// Failure reasons of a trajectory (Trajectory.Failure).
const (
	FailNone     = ""
	FailFormat   = "format"    // an invalid step under EndOnInvalid
	FailMaxTurns = "max_turns" // MaxTurns steps without an answer
)

// StepRecord is everything one step saw and did.
type StepRecord struct {
	ContextIDs []int      `json:"context_ids"` // the exact ids the step was generated from
	OutputIDs  []int      `json:"output_ids"`  // the ids sampled, as given to Step
	Logprobs   []float32  `json:"logprobs"`    // the sampler's log-prob of each output id (may be nil)
	Text       string     `json:"text"`        // decoded output (trailing EOS left out)
	Kind       ActionKind `json:"-"`
	Action     string     `json:"action"` // Kind as text: "search", "answer" or "none"
	Valid      bool       `json:"valid"`
	Reason     string     `json:"reason,omitempty"` // why the step was invalid
	Mem        string     `json:"mem"`
	// MemStart, MemEnd: token span of the <mem>…</mem> block within
	// OutputIDs (-1, -1 when there is none); see Parsed.
	MemStart      int      `json:"mem_start"`
	MemEnd        int      `json:"mem_end"`
	Query         string   `json:"query,omitempty"`
	Answer        string   `json:"answer,omitempty"`
	DocIDs        []string `json:"doc_ids,omitempty"` // the passages shown, in order
	ObsIDs        []int    `json:"obs_ids"`           // the observation that answered the step (nil if none)
	ObsText       string   `json:"obs_text"`
	ObsCut        bool     `json:"obs_cut,omitempty"`
	ContextTokens int      `json:"context_tokens"` // len(ContextIDs)
	OutputTokens  int      `json:"output_tokens"`  // len(OutputIDs)
}

// Trajectory is one rollout of the protocol. Drive it with Context, Step and
// Observe until Done. Its exported fields are the record; read them, do not
// change them while the trajectory runs.
type Trajectory struct {
	Questions []string     `json:"questions"`
	Steps     []StepRecord `json:"steps"`

	AnswerText  string   `json:"answer_text"`  // the final step's <answer> text ("" without one)
	Answers     []string `json:"answers"`      // AnswerText split on ";" and trimmed
	AnswerCount bool     `json:"answer_count"` // len(Answers) == len(Questions)
	// FormatOK: the trajectory ended with an answer of the right count and
	// no step was invalid (a corrected step still counts against it).
	FormatOK     bool   `json:"format_ok"`
	Failure      string `json:"failure"` // FailNone, FailFormat or FailMaxTurns
	InvalidSteps int    `json:"invalid_steps"`
	Turns        int    `json:"turns"`        // number of steps taken
	TotalTokens  int    `json:"total_tokens"` // Σ over steps of context + generated tokens
	PeakTokens   int    `json:"peak_tokens"`  // max over steps of context + generated tokens

	a       *Agent
	prompt  []int
	history []Turn
	state   trajState
	pending []int // the context of the next step, once computed
}

type trajState int

const (
	wantStep    trajState = iota // next call: Context / Step
	wantObserve                  // the last step searched; next call: Observe
	finished
)

// NewTrajectory starts a trajectory on a task of len(questions) objectives.
func (a *Agent) NewTrajectory(questions []string) *Trajectory {
	return &Trajectory{
		Questions: append([]string(nil), questions...),
		a:         a,
		prompt:    a.PromptIDs(questions),
	}
}

// PromptIDs are the ids of the task prompt (see Agent.PromptIDs).
func (tr *Trajectory) PromptIDs() []int { return append([]int(nil), tr.prompt...) }

// Done reports whether the trajectory has ended.
func (tr *Trajectory) Done() bool { return tr.state == finished }

// History is the trajectory so far as Turns (output ids and observation
// ids per step), the input of BuildContext and MemorySequences.
func (tr *Trajectory) History() []Turn { return append([]Turn(nil), tr.history...) }

// Context is the ids the next step is generated from: the task prompt, the
// last Keep steps with their observations and the generation prompt (see
// BuildContext). It returns nil once the trajectory is done or while it
// waits for an observation.
func (tr *Trajectory) Context() []int {
	if tr.state != wantStep {
		return nil
	}
	if tr.pending == nil {
		tr.pending = tr.a.BuildContext(tr.prompt, tr.history)
	}
	return append([]int(nil), tr.pending...)
}

// StepResult tells the engine what to do after a step.
type StepResult struct {
	Parsed
	// NeedSearch: retrieve for Query and call Observe. False for a search at
	// the last turn: the trajectory has ended and needs no results.
	NeedSearch bool
	Done       bool
}

// ErrState is returned when a call does not fit the trajectory's state.
var ErrState = errors.New("agent: call out of order")

// Step records one generated step: output ids exactly as sampled (stop
// string kept; a trailing EOS may be there too) and their log-probs (nil, or
// one per id). It parses the output from these ids alone and moves the
// trajectory on: an answer ends it; a search waits for Observe (or ends it
// at the last turn with FailMaxTurns); an invalid step ends it with
// FailFormat, or under CorrectOnInvalid gets the corrective message as its
// observation and the trajectory goes on.
func (tr *Trajectory) Step(output []int, logprobs []float32) (StepResult, error) {
	if tr.state != wantStep {
		return StepResult{}, fmt.Errorf("%w: Step while the trajectory %s", ErrState, tr.stateWord())
	}
	if logprobs != nil && len(logprobs) != len(output) {
		return StepResult{}, fmt.Errorf("agent: %d log-probs for %d output ids", len(logprobs), len(output))
	}
	ctx := tr.pending
	if ctx == nil {
		ctx = tr.a.BuildContext(tr.prompt, tr.history)
	}
	tr.pending = nil
	out := append([]int(nil), output...)
	p := tr.a.Parse(out)
	rec := StepRecord{
		ContextIDs:    ctx,
		OutputIDs:     out,
		Logprobs:      append([]float32(nil), logprobs...),
		Text:          p.Text,
		Kind:          p.Kind,
		Action:        p.Kind.String(),
		Valid:         p.Valid,
		Reason:        p.Reason,
		Mem:           p.Mem,
		MemStart:      p.MemStart,
		MemEnd:        p.MemEnd,
		Query:         p.Query,
		Answer:        p.Answer,
		ContextTokens: len(ctx),
		OutputTokens:  len(out),
	}
	if logprobs == nil {
		rec.Logprobs = nil
	}
	tr.Steps = append(tr.Steps, rec)
	tr.history = append(tr.history, Turn{Output: out})
	tr.Turns = len(tr.Steps)
	n := rec.ContextTokens + rec.OutputTokens
	tr.TotalTokens += n
	if n > tr.PeakTokens {
		tr.PeakTokens = n
	}
	left := tr.a.cfg.MaxTurns - tr.Turns // steps still allowed after this one
	res := StepResult{Parsed: p}
	switch {
	case !p.Valid:
		tr.InvalidSteps++
		if tr.a.cfg.OnInvalid == EndOnInvalid {
			tr.finish(FailFormat)
		} else if left < 1 {
			tr.finish(FailMaxTurns)
		} else {
			tr.setObs(tr.a.Corrective(p.Reason, left))
		}
	case p.Kind == ActionAnswer:
		tr.AnswerText = p.Answer
		tr.Answers, tr.AnswerCount = qa.SplitAnswers(p.Answer, len(tr.Questions))
		tr.finish(FailNone)
	case left < 1:
		tr.finish(FailMaxTurns)
	default:
		tr.state = wantObserve
		res.NeedSearch = true
	}
	res.Done = tr.state == finished
	return res, nil
}

// Observe answers the last step's search with the retrieved passages (the
// first TopK are shown, the rest ignored).
func (tr *Trajectory) Observe(docs []Doc) error {
	if tr.state != wantObserve {
		return fmt.Errorf("%w: Observe while the trajectory %s", ErrState, tr.stateWord())
	}
	if len(docs) > tr.a.cfg.TopK {
		docs = docs[:tr.a.cfg.TopK]
	}
	left := tr.a.cfg.MaxTurns - tr.Turns
	last := &tr.Steps[len(tr.Steps)-1]
	for _, d := range docs {
		last.DocIDs = append(last.DocIDs, d.ID)
	}
	tr.setObs(tr.a.Observation(docs, left))
	return nil
}

func (tr *Trajectory) setObs(o Observation) {
	last := &tr.Steps[len(tr.Steps)-1]
	last.ObsIDs, last.ObsText, last.ObsCut = o.IDs, o.Text, o.Cut
	tr.history[len(tr.history)-1].Obs = o.IDs
	tr.state = wantStep
}

func (tr *Trajectory) finish(failure string) {
	tr.Failure = failure
	tr.state = finished
	tr.FormatOK = failure == FailNone && tr.InvalidSteps == 0 && tr.AnswerCount
	if failure == FailNone {
		// Only an answer can mark the count; keep it consistent otherwise.
		return
	}
	tr.AnswerCount = false
}

func (tr *Trajectory) stateWord() string {
	switch tr.state {
	case wantStep:
		return "waits for a step"
	case wantObserve:
		return "waits for an observation"
	}
	return "has ended"
}

// CheckRecord verifies a stored trajectory against this agent's protocol:
// every step's ContextIDs must be exactly what BuildContext gives for the
// task's prompt and the recorded outputs and observations before it, counts
// must match the ids, and mem spans must lie inside the outputs. The update
// stage can run it on a rollouts file to make sure it trains on the contexts
// the rollout saw, under the same configuration.
func (a *Agent) CheckRecord(questions []string, steps []StepRecord) error {
	prompt := a.PromptIDs(questions)
	history := make([]Turn, 0, len(steps))
	for i, s := range steps {
		want := a.BuildContext(prompt, history)
		if len(want) != len(s.ContextIDs) {
			return fmt.Errorf("agent: step %d: stored context has %d ids, the protocol gives %d", i+1, len(s.ContextIDs), len(want))
		}
		for j := range want {
			if want[j] != s.ContextIDs[j] {
				return fmt.Errorf("agent: step %d: stored context differs from the protocol's at id %d", i+1, j)
			}
		}
		if s.ContextTokens != len(s.ContextIDs) || s.OutputTokens != len(s.OutputIDs) {
			return fmt.Errorf("agent: step %d: token counts %d/%d do not match %d/%d ids", i+1, s.ContextTokens, s.OutputTokens, len(s.ContextIDs), len(s.OutputIDs))
		}
		if s.Logprobs != nil && len(s.Logprobs) != len(s.OutputIDs) {
			return fmt.Errorf("agent: step %d: %d log-probs for %d output ids", i+1, len(s.Logprobs), len(s.OutputIDs))
		}
		if (s.MemStart != -1 || s.MemEnd != -1) && (s.MemStart < 0 || s.MemEnd <= s.MemStart || s.MemEnd > len(s.OutputIDs)) {
			return fmt.Errorf("agent: step %d: mem span [%d,%d) outside %d output ids", i+1, s.MemStart, s.MemEnd, len(s.OutputIDs))
		}
		history = append(history, Turn{Output: s.OutputIDs, Obs: s.ObsIDs})
	}
	return nil
}
