package agent

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// ActionKind is what a step asks for.
type ActionKind int

const (
	ActionNone   ActionKind = iota // no valid action (invalid step)
	ActionSearch                   // <search>q</search> or <tool_call>q</tool_call>
	ActionAnswer                   // <answer>…</answer>
)

func (k ActionKind) String() string {
	switch k {
	case ActionSearch:
		return "search"
	case ActionAnswer:
		return "answer"
	}
	return "none"
}

// Reasons a step is invalid (Parsed.Reason).
const (
	ReasonEmpty          = "empty_output"
	ReasonTextBeforeMem  = "text_before_mem"
	ReasonMissingMem     = "missing_mem"
	ReasonUnclosedMem    = "unclosed_mem"
	ReasonMissingThink   = "missing_think"
	ReasonUnclosedThink  = "unclosed_think"
	ReasonMissingAction  = "missing_action"
	ReasonUnclosedAction = "unclosed_action"
	ReasonTagInside      = "tag_inside_block"
	ReasonEmptyQuery     = "empty_query"
	ReasonEmptyAnswer    = "empty_answer"
	ReasonMultiAction    = "multiple_actions"
	ReasonTextAfter      = "text_after_action"
)

// Parsed is one step's output read against the step format.
type Parsed struct {
	Valid  bool
	Reason string // why not Valid ("" when valid)
	Kind   ActionKind
	Query  string // the search query, trimmed (Kind == ActionSearch)
	Answer string // the answer text, trimmed (Kind == ActionAnswer)
	Mem    string // the memory text, trimmed ("" without a complete <mem> block)
	Think  string
	// MemStart, MemEnd is the token span [MemStart, MemEnd) of the whole
	// <mem>…</mem> block in the output ids, or -1, -1 when the output does not
	// open with a complete <mem> block. A token that straddles a tag boundary
	// (e.g. " <mem" or ">\n") is inside the span: the span is the shortest run
	// of tokens whose text covers the block, so it may carry a few characters
	// of white space beside the tags, never fewer than the block.
	MemStart, MemEnd int
	// Text is the decoded output that was parsed (trailing EOS ids left out).
	Text string
}

// protocolTags may not appear inside a block: their presence means a nested
// or unclosed block, or a second action.
var protocolTags = []string{
	"<mem>", "</mem>", "<think>", "</think>", "<search>", "</search>",
	"<tool_call>", "</tool_call>", "<answer>", "</answer>", "<information>", "</information>",
}

func hasTag(s string) bool {
	for _, t := range protocolTags {
		if strings.Contains(s, t) {
			return true
		}
	}
	return false
}

func skipSpace(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			return i
		}
		i += n
	}
	return i
}

// block reads <tag>content</tag> at s[i:]. ok is false when s[i:] does not
// open with <tag>; closed is false when the closing tag is missing.
func block(s string, i int, tag string) (content string, end int, ok, closed bool) {
	open, cls := "<"+tag+">", "</"+tag+">"
	if !strings.HasPrefix(s[i:], open) {
		return "", i, false, false
	}
	j := strings.Index(s[i+len(open):], cls)
	if j < 0 {
		return s[i+len(open):], len(s), true, false
	}
	c := s[i+len(open) : i+len(open)+j]
	return c, i + len(open) + j + len(cls), true, true
}

// textParse is the character-level result of parsing; Parse adds tokens.
type textParse struct {
	Parsed
	memChar   [2]int // byte offsets of the <mem> block, -1 when absent
	actionEnd int    // byte offset just after the action's closing tag
	trailing  bool   // non-space text follows the action
}

// parseText checks the step format on text: optional white space, <mem>…
// </mem>, white space, <think>…</think>, white space, one action block,
// white space. No block may contain a protocol tag. A text that is valid up
// to its action but has more after it comes back with trailing set and
// Reason ReasonTextAfter (or ReasonMultiAction when what follows opens
// another action); Parse decides whether that tail is tolerable.
func parseText(text, tool string) textParse {
	p := textParse{memChar: [2]int{-1, -1}}
	p.MemStart, p.MemEnd = -1, -1
	p.Text = text
	fail := func(r string) textParse { p.Reason = r; return p }
	if strings.TrimSpace(text) == "" {
		return fail(ReasonEmpty)
	}
	i := skipSpace(text, 0)
	mem, end, ok, closed := block(text, i, "mem")
	if !ok {
		if strings.Contains(text, "<mem>") {
			return fail(ReasonTextBeforeMem)
		}
		return fail(ReasonMissingMem)
	}
	if !closed {
		return fail(ReasonUnclosedMem)
	}
	if hasTag(mem) {
		return fail(ReasonTagInside)
	}
	p.memChar = [2]int{i, end}
	p.Mem = strings.TrimSpace(mem)
	i = skipSpace(text, end)
	think, end, ok, closed := block(text, i, "think")
	if !ok {
		return fail(ReasonMissingThink)
	}
	if !closed {
		return fail(ReasonUnclosedThink)
	}
	if hasTag(think) {
		return fail(ReasonTagInside)
	}
	p.Think = strings.TrimSpace(think)
	i = skipSpace(text, end)
	kind := ActionSearch
	content, end, ok, closed := block(text, i, tool)
	if !ok {
		kind = ActionAnswer
		content, end, ok, closed = block(text, i, "answer")
	}
	if !ok {
		return fail(ReasonMissingAction)
	}
	if !closed {
		return fail(ReasonUnclosedAction)
	}
	if hasTag(content) {
		return fail(ReasonTagInside)
	}
	content = strings.TrimSpace(content)
	if content == "" {
		if kind == ActionSearch {
			return fail(ReasonEmptyQuery)
		}
		return fail(ReasonEmptyAnswer)
	}
	p.Kind = kind
	if kind == ActionSearch {
		p.Query = content
	} else {
		p.Answer = content
	}
	p.actionEnd = end
	if rest := text[end:]; strings.TrimSpace(rest) != "" {
		p.trailing = true
		r := strings.TrimSpace(rest)
		if strings.HasPrefix(r, "<"+tool+">") || strings.HasPrefix(r, "<answer>") {
			return fail(ReasonMultiAction)
		}
		return fail(ReasonTextAfter)
	}
	p.Valid = true
	return p
}

// Parse reads one step's output ids (as sampled) against the step format.
// Trailing EOS ids (Config.EOSIDs, and <|im_end|> in chat mode) are left
// out of the parsed text. Only these output ids are read: an <answer> that
// appears anywhere in the prompt or an observation can never become the
// answer.
//
// The output is valid iff, up to white space, it is exactly
// <mem>…</mem><think>…</think> followed by one <{tool}>query</{tool}> or
// <answer>text</answer>, with a non-empty query or answer and no protocol
// tag inside any block. One exception: non-space text after the action's
// closing tag is tolerated when it lies entirely in the token that completed
// that tag (a sampler stopping on the stop string cannot cut inside a
// token); the step's ids keep that token whole.
func (a *Agent) Parse(output []int) Parsed {
	body := output
	for len(body) > 0 && a.eos[body[len(body)-1]] {
		body = body[:len(body)-1]
	}
	text := a.tok.Decode(body)
	p := parseText(text, a.cfg.ToolTag)
	if p.trailing && p.Reason == ReasonTextAfter && len(body) > 0 {
		// Is the tail inside the last token? Then every token but the last
		// decodes to a prefix that ends before the closing tag does.
		head := a.tok.Decode(body[:len(body)-1])
		if strings.HasPrefix(text, head) && len(head) < p.actionEnd {
			p.Valid, p.Reason = true, ""
		}
	}
	if !p.Valid {
		p.Kind, p.Query, p.Answer = ActionNone, "", ""
	}
	if p.memChar[0] >= 0 {
		p.MemStart, p.MemEnd = tokenSpan(a.tok, body, text, p.memChar[0], p.memChar[1])
	}
	return p.Parsed
}

// tokenSpan maps the byte range [cs, ce) of text = Decode(ids) to the
// shortest token range [ts, te) whose text covers it: ts is the largest
// token count whose decoding is a prefix of text no longer than cs, te the
// smallest whose decoding is a prefix of text at least ce long. Decoding
// prefixes (rather than single tokens) keeps multi-byte characters split
// over tokens right: a prefix ending inside a character decodes to U+FFFD,
// is not a prefix of text, and is skipped. Costs O(te²) token look-ups;
// the <mem> block opens the output, so te is small.
func tokenSpan(tok Tokenizer, ids []int, text string, cs, ce int) (ts, te int) {
	ts, te = 0, len(ids)
	for n := 1; n <= len(ids); n++ {
		s := tok.Decode(ids[:n])
		if !strings.HasPrefix(text, s) {
			continue
		}
		if len(s) <= cs {
			ts = n
		}
		if len(s) >= ce {
			te = n
			break
		}
	}
	return ts, te
}
