package agent

import (
	"strconv"
	"strings"
)

const (
	imStartTok = "<|im_start|>"
	imEndTok   = "<|im_end|>"
)

// DefaultTaskPrompt is the package's own task instructions. {tool} becomes
// the tool tag, {k} the number of questions and {questions} the questions
// joined with "; ".
const DefaultTaskPrompt = `You are a research agent. You answer questions by searching a Wikipedia index, one search at a time.

Work in steps. Each step is written in exactly this order, with nothing outside the tags:
<mem>...</mem> your memory, rewritten in full at every step: every fact found so far that helps with the questions, the answers already known, and what is still missing.
<think>...</think> your reasoning for this step.
Then exactly one action, after which you stop:
<{tool}>query</{tool}> to search: a few keywords or a short phrase about a single question. The passages found come back inside <information>...</information>.
<answer>answer 1; answer 2; ...</answer> once every question is answered: exactly {k} answer(s), in the order of the questions, separated by "; ", each as short as possible (a name, a date, a number), without explanations.

Memory rule: before your next step the environment deletes everything except these instructions, your latest step and its <information>. Whatever you will still need later must be written in <mem>, or it is lost.

Questions: {questions}`

// DefaultScoreLeadIn is the fixed text placed after the memory (or the raw
// history) and before the gold answer in the memory-reward sequences: it
// closes a short thought and opens the answer tag, so the gold ids are read
// where the policy would write its answer.
const DefaultScoreLeadIn = "<think>I can give the final answer now.</think>\n<answer>"

// TaskText is the text of the task prompt for the given questions, before
// any chat wrapping.
func (a *Agent) TaskText(questions []string) string {
	t := a.cfg.TaskPrompt
	if t == "" {
		t = DefaultTaskPrompt
	}
	r := strings.NewReplacer(
		"{tool}", a.cfg.ToolTag,
		"{k}", strconv.Itoa(len(questions)),
		"{questions}", JoinQuestions(questions),
	)
	return r.Replace(t)
}

// JoinQuestions joins questions with "; ", each trimmed.
func JoinQuestions(questions []string) string {
	qs := make([]string, len(questions))
	for i, q := range questions {
		qs[i] = strings.TrimSpace(q)
	}
	return strings.Join(qs, "; ")
}

// PromptIDs are the ids of the task prompt: the part of every context that
// comes before the first step.
//
// Chat mode (Qwen ChatML, the same text Qwen2.5's chat template renders for
// these messages):
//
//	<|im_start|>system\n{SystemPrompt}<|im_end|>\n     (only when SystemPrompt != "")
//	<|im_start|>user\n{task text}<|im_end|>\n
//
// Raw mode: the task text followed by "\n".
//
// The generation prompt ("<|im_start|>assistant\n" in chat mode, nothing in
// raw mode) is not part of PromptIDs; Context adds it.
func (a *Agent) PromptIDs(questions []string) []int {
	text := a.TaskText(questions)
	if !a.cfg.Chat {
		return a.tok.Encode(text + "\n")
	}
	var s string
	if a.cfg.SystemPrompt != "" {
		s = imStartTok + "system\n" + a.cfg.SystemPrompt + imEndTok + "\n"
	}
	s += imStartTok + "user\n" + text + imEndTok + "\n"
	return a.tok.Encode(s)
}

// Turn is one finished step as the context needs it: the output ids exactly
// as sampled and the ids of the observation that answered it (empty for a
// step that got none).
type Turn struct {
	Output []int
	Obs    []int
}

// GenPrompt is the generation prompt appended at the end of every context:
// "<|im_start|>assistant\n" in chat mode, nothing in raw mode.
func (a *Agent) GenPrompt() []int { return append([]int(nil), a.asstOpen...) }

// BuildContext is the context of the step that follows history: prompt ⊕
// the last Keep turns of history (all of them for KeepAll) ⊕ the generation
// prompt. It only concatenates ids: output ids go in as sampled and are
// never decoded or encoded again.
//
// Chat mode wraps each kept turn as two chat turns:
//
//	<|im_start|>assistant\n ⊕ Output ⊕ <|im_end|>\n      (the step's own turn)
//	<|im_start|>user\n ⊕ Obs ⊕ <|im_end|>\n              (the observation turn)
//
// When Output already ends with <|im_end|> (the model closed its turn
// itself), only "\n" is added after it, so the turn is closed exactly once.
// Any other trailing EOS id stays in place as sampled. A turn with an empty
// Obs (only possible for the step that ended the trajectory) has no
// observation turn. Raw mode concatenates Output ⊕ Obs with no wrapping; the
// raw observation carries its own "\n\n" on both sides (see Observation).
//
// The template pieces are encoded separately and the ids concatenated. As
// text, the chat-mode context is exactly what Qwen2.5's chat template renders
// for [system, user, assistant, user, …] messages with add_generation_prompt
// (the assistant contents being the decoded outputs); the ids are not always
// what encoding that text in one piece would give — a sampled output may be
// tokenized in a way the tokenizer would not choose, and in raw mode the
// "\n\n" that opens an observation would merge with the ">" of the step's
// stop string — which is the point: the ids are the ones the model saw and
// sampled, and nothing downstream may re-encode them. The template pieces
// themselves (around special tokens, "\n" before "<") sit at Qwen
// pre-tokenizer boundaries, so the prompt ids match a one-piece encoding.
// Qwen3's template, which strips <think> from earlier assistant turns, is
// deliberately not imitated: the model sees its previous step verbatim.
func (a *Agent) BuildContext(prompt []int, history []Turn) []int {
	kept := history
	if k := int(a.cfg.Keep); a.cfg.Keep != KeepAll && len(kept) > k {
		kept = kept[len(kept)-k:]
	}
	return a.render(prompt, kept, true)
}

// render concatenates prompt, turns (all given) and, when gen is set, the
// generation prompt.
func (a *Agent) render(prompt []int, turns []Turn, gen bool) []int {
	n := len(prompt) + len(a.asstOpen)
	for _, t := range turns {
		n += len(t.Output) + len(t.Obs) + len(a.asstOpen) + len(a.asstClose) + len(a.userOpen) + len(a.turnClose)
	}
	out := make([]int, 0, n)
	out = append(out, prompt...)
	for _, t := range turns {
		out = a.appendTurn(out, t)
	}
	if gen {
		out = append(out, a.asstOpen...)
	}
	return out
}

func (a *Agent) appendTurn(out []int, t Turn) []int {
	if !a.cfg.Chat {
		out = append(out, t.Output...)
		return append(out, t.Obs...)
	}
	out = append(out, a.asstOpen...)
	out = append(out, t.Output...)
	if len(t.Output) > 0 && t.Output[len(t.Output)-1] == a.imEnd {
		out = append(out, a.newline...)
	} else {
		out = append(out, a.asstClose...)
	}
	if len(t.Obs) > 0 {
		out = append(out, a.userOpen...)
		out = append(out, t.Obs...)
		out = append(out, a.turnClose...)
	}
	return out
}

// FormatStep is the text of one step in the protocol's format:
// <mem>…</mem><think>…</think> then <{tool}>query</{tool}> when query is not
// empty, else <answer>answer</answer>. tool "" means "search". The scripted
// expert and imported trajectories write their steps with it, so that Parse
// reads them back as the policy's own.
func FormatStep(tool, mem, think, query, answer string) string {
	if tool == "" {
		tool = "search"
	}
	t := "<mem>" + mem + "</mem><think>" + think + "</think>"
	if query != "" {
		return t + "<" + tool + ">" + query + "</" + tool + ">"
	}
	return t + "<answer>" + answer + "</answer>"
}
