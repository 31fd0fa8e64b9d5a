// Package agent is the MemPO memory-agent protocol, kept pure and token-exact:
// the task prompt, the context the policy sees at every step (the task plus
// only the last K steps and their observations), the parsing of one step's
// output into memory, thought and action, the <information> observation, the
// per-trajectory state machine with its token accounting, and the two
// teacher-forcing sequences of the memory reward.
//
// The package never generates, retrieves or scores with a model; the rollout
// engine does that and calls in here. It never decodes generated ids and
// encodes them again: the ids a step sampled are the ids every later context
// holds, so the contexts stored in a rollout are exactly the ones the model
// saw, and training can recompute log-probs under them.
//
// The engine drives one trajectory like this:
//
//	ag, _ := agent.New(agent.DefaultConfig(), tok)
//	tr := ag.NewTrajectory(task.Questions)
//	for !tr.Done() {
//		ids, logps := generate(tr.Context(), ag.StopStrings(), cfg.MaxStepTokens)
//		res, _ := tr.Step(ids, logps)
//		if res.NeedSearch {
//			tr.Observe(retrieve(res.Query, cfg.TopK))
//		}
//	}
//	// tr.Steps, tr.AnswerText, tr.Answers, tr.FormatOK, tr.Failure,
//	// tr.TotalTokens, tr.PeakTokens are the record.
package agent

import (
	"fmt"
	"strconv"
	"strings"
)

// Tokenizer is what the package needs of a tokenizer. Encode must recognise
// special tokens written in the text (e.g. "<|im_start|>") and must not add a
// BOS or any other token of its own. Decode must keep special tokens in its
// output (skip_special_tokens=False). lib/tokenizer satisfies it.
type Tokenizer interface {
	Encode(text string) []int
	Decode(ids []int) string
}

// Doc is one retrieved passage. Contents is the wiki-18 form
// "\"Title\"\ntext"; when it is empty, Title and Text are used instead.
type Doc struct {
	ID, Title, Text, Contents string
	Score                     float64
}

// InvalidPolicy says what happens to a trajectory after a step whose output
// does not follow the step format.
type InvalidPolicy int

const (
	// EndOnInvalid ends the trajectory as a format failure (MEM1's rule).
	EndOnInvalid InvalidPolicy = iota
	// CorrectOnInvalid answers the step with a corrective message as its
	// observation and lets the trajectory go on (Search-R1's rule). The
	// trajectory still counts as not format-correct.
	CorrectOnInvalid
)

// Keep is how many previous steps a context holds: 1 is MemPO, K > 1 the
// last K steps, KeepAll every step. Its text form ("1", "K" or "all") is what
// the --keep flag takes and what the rollouts file's keep column holds.
type Keep int

// KeepAll as Config.Keep keeps every previous step: the full-history ReAct
// baseline.
const KeepAll Keep = 0

// String is "all" for KeepAll and the step count otherwise.
func (k Keep) String() string {
	if k == KeepAll {
		return "all"
	}
	return strconv.Itoa(int(k))
}

// Config is the protocol. The zero value is not usable; start from
// DefaultConfig.
type Config struct {
	// ToolTag is the tag of the search action: "search" (<search>q</search>)
	// or "tool_call" (<tool_call>q</tool_call>).
	ToolTag string
	// MaxTurns is the number of steps (generations) a trajectory may take.
	// A trajectory that has not answered after MaxTurns steps fails with
	// FailMaxTurns.
	MaxTurns int
	// MaxStepTokens is the generation budget of one step. The package does
	// not generate; it is here so one Config carries the whole protocol.
	MaxStepTokens int
	// ObsMaxTokens caps the ids of one observation (everything Observation
	// returns, wrappers and hint included); 0 means no cap. The passages are
	// cut, never the tags.
	ObsMaxTokens int
	// TopK is the number of passages shown per search; Observe ignores any
	// beyond it.
	TopK int
	// Keep is how many previous steps the context holds: 1 is MemPO, K > 1
	// the last K steps, KeepAll (0) every step.
	Keep Keep
	// TurnsHint prepends a turns-left line inside every observation.
	TurnsHint bool
	// OnInvalid is the invalid-step policy.
	OnInvalid InvalidPolicy
	// Chat renders the prompt and steps as Qwen ChatML turns (instruct
	// checkpoints); off, everything is raw text (base checkpoints).
	Chat bool
	// SystemPrompt is the system turn in chat mode; "" means no system turn.
	// Ignored in raw mode.
	SystemPrompt string
	// TaskPrompt overrides the task instructions. "{questions}" is replaced
	// by the questions joined with "; ", "{k}" by their number and "{tool}"
	// by ToolTag. "" means the package's own text (DefaultTaskPrompt).
	TaskPrompt string
	// TitleQuotes keeps the double quotes of a wiki-18 title in the
	// observation (`Doc 1(Title: "Paris") …`, as Search-R1 shows it). Off by
	// default: the quotes are an artefact of the corpus layout and cost
	// tokens.
	TitleQuotes bool
	// ScoreLeadIn is the fixed text between the context and the gold answer
	// in the memory-reward sequences (see MemorySequences). "{k}" in it is
	// replaced by the task's number of objectives, for a protocol whose
	// answer step names it.
	ScoreLeadIn string
	// ScoreGoldPrefix is put before the gold answer text when it is encoded
	// for the memory reward, so that its ids are the ones the policy writes
	// after <answer> (" Paris" is another id than "Paris" in a byte-level
	// BPE; a protocol whose answers start with a space sets " ").
	ScoreGoldPrefix string
	// ScoreGoldNumbered scores each objective's gold after its position's
	// marker, "[1] Paris; [2] Berlin", for a protocol whose answers number
	// their parts that way (the generated world's; the answer checker reads
	// such parts without the marker, see qa.SplitAnswers).
	ScoreGoldNumbered bool
	// ScoreLayout is where the memory-reward sequences put the memory (see
	// MemorySequences): ScoreInTurn (the default) or ScoreNextStep.
	ScoreLayout ScoreLayout
	// ScorePerObjective scores P(gold | ·) of a k-objective task as the mean
	// over objectives of each one's geometric-mean probability within the
	// same teacher-forced pass (rl.MultiGoldProb, one alias each) instead of
	// the geometric mean over the joint gold's ids (the paper's). In the
	// joint form one answer filed among eight moves the mean log-prob by an
	// eighth, as much as the guesses at the other seven move with the
	// memory around them; in the mean it adds its own probability over k.
	// MemorySequences then sets MemorySeqs.GoldEnds.
	ScorePerObjective bool
	// EOSIDs are the ids that end generation (generation_config's
	// eos_token_id). Trailing EOS ids are left out of the text that is
	// parsed; they stay in the step's output ids.
	EOSIDs []int
}

// ScoreLayout is where the memory P(gold | q, mem_t) is scored in sees the
// memory. Its text form ("turn" or "next-step") is what mempo-rollout
// --score-layout takes and what a rollout run's settings record.
type ScoreLayout int

const (
	// ScoreInTurn opens the answering assistant turn with the memory:
	// prompt ⊕ generation prompt ⊕ <mem>…</mem> ⊕ lead-in ⊕ gold, the
	// scoring prompt of mempo-paper §2.2. A pretrained policy reads a memory
	// there; a policy trained only under keep 1 has seen a memory right after
	// the prompt only at its first step, where it holds nothing yet.
	ScoreInTurn ScoreLayout = iota
	// ScoreNextStep puts the memory where a keep-1 policy reads its past:
	// the context of the step after it as the environment renders it, the
	// step reduced to its <mem> block and its observation left out (prompt ⊕
	// <|im_start|>assistant\n ⊕ <mem>…</mem> ⊕ <|im_end|>\n ⊕ generation
	// prompt) ⊕ lead-in ⊕ gold. The history term is then the same template
	// with the raw steps in the memory's place, so template effects cancel
	// in R^M.
	ScoreNextStep
)

// String is the layout's flag form.
func (l ScoreLayout) String() string {
	switch l {
	case ScoreInTurn:
		return "turn"
	case ScoreNextStep:
		return "next-step"
	}
	return "ScoreLayout(" + strconv.Itoa(int(l)) + ")"
}

// ParseScoreLayout reads a layout's flag form, "turn" or "next-step".
func ParseScoreLayout(s string) (ScoreLayout, error) {
	switch strings.TrimSpace(strings.ToLower(s)) {
	case "turn":
		return ScoreInTurn, nil
	case "next-step":
		return ScoreNextStep, nil
	}
	return 0, fmt.Errorf("score layout %q: want \"turn\" or \"next-step\"", s)
}

// Qwen25System is the system message Qwen2.5's chat template inserts when a
// conversation has none; checkpoints made with apply_chat_template from a
// user-only conversation (Search-R1, MEM1) saw it.
const Qwen25System = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

// DefaultConfig is MemPO's protocol: <search> tool, 16 turns, top-3
// passages, keep 1 step, turns-left hint, end on an invalid step, ChatML.
func DefaultConfig() Config {
	return Config{
		ToolTag:       "search",
		MaxTurns:      16,
		MaxStepTokens: 1024,
		ObsMaxTokens:  1000,
		TopK:          3,
		Keep:          1,
		TurnsHint:     true,
		OnInvalid:     EndOnInvalid,
		Chat:          true,
		SystemPrompt:  Qwen25System,
		ScoreLeadIn:   DefaultScoreLeadIn,
	}
}

// ParseKeep reads a keep flag: "all" (or "0") is KeepAll, otherwise a
// positive step count.
func ParseKeep(s string) (Keep, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "all" {
		return KeepAll, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("keep %q: want a step count ≥ 1, or \"all\"", s)
	}
	return Keep(n), nil
}

// ParseInvalidPolicy reads "end" or "correct".
func ParseInvalidPolicy(s string) (InvalidPolicy, error) {
	switch strings.TrimSpace(strings.ToLower(s)) {
	case "end", "fail":
		return EndOnInvalid, nil
	case "correct", "continue":
		return CorrectOnInvalid, nil
	}
	return 0, fmt.Errorf("invalid-step policy %q: want \"end\" or \"correct\"", s)
}

func (c Config) validate() error {
	switch c.ToolTag {
	case "search", "tool_call":
	default:
		return fmt.Errorf("agent: tool tag %q: want \"search\" or \"tool_call\"", c.ToolTag)
	}
	if c.MaxTurns < 1 {
		return fmt.Errorf("agent: max turns must be ≥ 1, got %d", c.MaxTurns)
	}
	if c.TopK < 1 {
		return fmt.Errorf("agent: topk must be ≥ 1, got %d", c.TopK)
	}
	if c.Keep < 0 {
		return fmt.Errorf("agent: keep must be ≥ 1 or KeepAll (0), got %d", c.Keep)
	}
	if c.ObsMaxTokens < 0 {
		return fmt.Errorf("agent: observation token limit must be ≥ 0, got %d", c.ObsMaxTokens)
	}
	if c.ScoreLayout != ScoreInTurn && c.ScoreLayout != ScoreNextStep {
		return fmt.Errorf("agent: unknown score layout %d", c.ScoreLayout)
	}
	if c.OnInvalid != EndOnInvalid && c.OnInvalid != CorrectOnInvalid {
		return fmt.Errorf("agent: unknown invalid-step policy %d", c.OnInvalid)
	}
	if c.TaskPrompt != "" && !strings.Contains(c.TaskPrompt, "{questions}") {
		return fmt.Errorf("agent: task prompt override has no {questions} placeholder")
	}
	return nil
}

// Agent is a Config bound to a tokenizer, with the fixed pieces of the
// rendering encoded once. It is safe for concurrent use: it never changes
// after New.
type Agent struct {
	cfg Config
	tok Tokenizer

	// Chat-mode template pieces (see render.go for where each goes).
	imEnd       int   // the id of <|im_end|>
	asstOpen    []int // "<|im_start|>assistant\n": the generation prompt
	asstClose   []int // "<|im_end|>\n"
	newline     []int // "\n", closes an assistant turn whose output already ends in <|im_end|>
	userOpen    []int // "<|im_start|>user\n"
	turnClose   []int // "<|im_end|>\n" after an observation
	leadIn      []int
	eos         map[int]bool
	stopStrings []string
}

// New checks cfg and prepares the agent.
func New(cfg Config, tok Tokenizer) (*Agent, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, fmt.Errorf("agent: nil tokenizer")
	}
	a := &Agent{cfg: cfg, tok: tok, eos: map[int]bool{}, imEnd: -1}
	a.cfg.EOSIDs = append([]int(nil), cfg.EOSIDs...)
	for _, id := range cfg.EOSIDs {
		a.eos[id] = true
	}
	if cfg.Chat {
		ids := tok.Encode(imEndTok)
		if len(ids) != 1 {
			return nil, fmt.Errorf("agent: chat mode needs %s to be one special token, the tokenizer gives %v", imEndTok, ids)
		}
		if st := tok.Encode(imStartTok); len(st) != 1 {
			return nil, fmt.Errorf("agent: chat mode needs %s to be one special token, the tokenizer gives %v", imStartTok, st)
		}
		a.imEnd = ids[0]
		// A chat model ends its turn with <|im_end|> whatever the
		// generation config says.
		a.eos[a.imEnd] = true
		a.asstOpen = tok.Encode(imStartTok + "assistant\n")
		a.asstClose = tok.Encode(imEndTok + "\n")
		a.newline = tok.Encode("\n")
		a.userOpen = tok.Encode(imStartTok + "user\n")
		a.turnClose = a.asstClose
	}
	a.leadIn = tok.Encode(cfg.ScoreLeadIn)
	a.stopStrings = []string{"</" + cfg.ToolTag + ">", "</answer>"}
	if cfg.ObsMaxTokens > 0 {
		// The tags and the longest hint must fit, or the cap could not be
		// kept without cutting a tag. Hints show n < MaxTurns; the one for
		// MaxTurns has at least as many digits as any of them.
		for _, n := range []int{1, max(2, cfg.MaxTurns)} {
			pre, suf := a.obsWrap(a.hint(n))
			if k := len(pre) + len(suf); k > cfg.ObsMaxTokens {
				return nil, fmt.Errorf("agent: observation limit %d is below the %d tokens of the <information> tags and hint", cfg.ObsMaxTokens, k)
			}
		}
	}
	return a, nil
}

// Config returns the agent's configuration.
func (a *Agent) Config() Config { return a.cfg }

// StopStrings are the strings after which a step's generation must stop,
// keeping the stop string in the output: the closing tag of the tool
// action and "</answer>".
func (a *Agent) StopStrings() []string { return append([]string(nil), a.stopStrings...) }

// TrimToStop returns the shortest prefix of ids whose decoding contains a
// stop string (all of ids when none does). The token that completes the stop
// string is kept, so the stop string is kept; a sampler cannot stop inside a
// token, so that token may carry a few characters past it, which Parse
// tolerates. Engines whose sampler already stops on StopStrings need not
// call it; it is for those that check after the fact.
func (a *Agent) TrimToStop(ids []int) []int {
	// A stop string of L bytes lies within the last L tokens of the first
	// prefix that holds it (every token decodes to at least one byte), so
	// only a window of L tokens is decoded per prefix. Stop strings are
	// ASCII, so a window that opens inside a multi-byte character cannot
	// hide or fake one.
	w := 0
	for _, s := range a.stopStrings {
		w = max(w, len(s))
	}
	for n := 1; n <= len(ids); n++ {
		s := a.tok.Decode(ids[max(0, n-w):n])
		for _, stop := range a.stopStrings {
			if strings.Contains(s, stop) {
				return ids[:n]
			}
		}
	}
	return ids
}
