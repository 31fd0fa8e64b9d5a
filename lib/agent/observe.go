package agent

import (
	"strconv"
	"strings"
)

// Observation is what the environment returns after a step, as ids and as
// text. IDs go into later contexts; Text is the readable copy (Decode of
// IDs, so a cut inside a multi-byte character shows as U+FFFD).
type Observation struct {
	IDs  []int
	Text string
	Cut  bool // the passages were cut to fit ObsMaxTokens
}

// hint is the turns-left line shown inside an observation when n steps
// remain (the step about to be generated included); "" when the hint is off
// or n < 1.
func (a *Agent) hint(n int) string {
	if !a.cfg.TurnsHint || n < 1 {
		return ""
	}
	if n == 1 {
		return "[Turns left: 1. This is your last step: it must end with <answer>.]"
	}
	return "[Turns left: " + strconv.Itoa(n) + "]"
}

// obsWrap are the ids before and after the passages of an observation.
//
// Chat mode: "<information>{hint}\n" … "</information>" (the chat turn
// around it is added by BuildContext). Raw mode adds "\n\n" on both sides,
// so the block stands on its own lines between two generations. Without a
// hint the "\n" after <information> is left out.
func (a *Agent) obsWrap(hint string) (pre, suf []int) {
	p, s := "<information>", "</information>"
	if hint != "" {
		p += hint + "\n"
	}
	if !a.cfg.Chat {
		p, s = "\n\n"+p, s+"\n\n"
	}
	return a.tok.Encode(p), a.tok.Encode(s)
}

// DocTitle is the passage's title: the first line of Contents without its
// surrounding double quotes unless TitleQuotes is set, or Title when
// Contents is empty.
func (a *Agent) DocTitle(d Doc) string {
	title, _ := a.splitDoc(d)
	return title
}

func (a *Agent) splitDoc(d Doc) (title, text string) {
	if d.Contents == "" {
		return strings.TrimSpace(d.Title), strings.TrimSpace(d.Text)
	}
	title, text, _ = strings.Cut(d.Contents, "\n")
	title = strings.TrimSpace(title)
	if !a.cfg.TitleQuotes && len(title) >= 2 && title[0] == '"' && title[len(title)-1] == '"' {
		title = title[1 : len(title)-1]
	}
	return title, strings.TrimSpace(text)
}

// PassagesText formats passages one per line as "Doc i(Title: T) text",
// i from 1 (the Search-R1 layout, which checkpoints of that lineage know).
// No passages give "No passages found."
func (a *Agent) PassagesText(docs []Doc) string {
	if len(docs) == 0 {
		return "No passages found."
	}
	var b strings.Builder
	for i, d := range docs {
		title, text := a.splitDoc(d)
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("Doc ")
		b.WriteString(strconv.Itoa(i + 1))
		b.WriteString("(Title: ")
		b.WriteString(title)
		b.WriteString(") ")
		b.WriteString(text)
	}
	return b.String()
}

// Observation formats the answer to a search: the first TopK docs inside
// <information>…</information>, with the turns-left hint for turnsLeft
// remaining steps. When ObsMaxTokens is set and the whole would exceed it,
// the passage ids are cut at the end so that the ids total exactly
// ObsMaxTokens; the opening tag, the hint and the closing </information> are
// always kept (Search-R1 cuts the tail and loses the closing tag).
func (a *Agent) Observation(docs []Doc, turnsLeft int) Observation {
	if len(docs) > a.cfg.TopK {
		docs = docs[:a.cfg.TopK]
	}
	pre, suf := a.obsWrap(a.hint(turnsLeft))
	body := a.tok.Encode(a.PassagesText(docs))
	cut := false
	if lim := a.cfg.ObsMaxTokens; lim > 0 && len(pre)+len(body)+len(suf) > lim {
		// New checked that pre and suf fit the limit; the guard only
		// matters for a turnsLeft beyond MaxTurns.
		body = body[:max(0, lim-len(pre)-len(suf))]
		cut = true
	}
	ids := make([]int, 0, len(pre)+len(body)+len(suf))
	ids = append(ids, pre...)
	ids = append(ids, body...)
	ids = append(ids, suf...)
	return Observation{IDs: ids, Text: a.tok.Decode(ids), Cut: cut}
}

// Corrective is the observation that answers an invalid step under
// CorrectOnInvalid: a plain message (no <information> tags) naming the
// problem and restating the step format, followed by the turns-left hint.
// Raw mode puts "\n\n" on both sides, as for an observation.
func (a *Agent) Corrective(reason string, turnsLeft int) Observation {
	msg := "Your last step did not follow the format (" + reason + "). Write <mem>...</mem><think>...</think> and then exactly one action, <" +
		a.cfg.ToolTag + ">query</" + a.cfg.ToolTag + "> or <answer>...</answer>, with nothing after it."
	if h := a.hint(turnsLeft); h != "" {
		msg += "\n" + h
	}
	if !a.cfg.Chat {
		msg = "\n\n" + msg + "\n\n"
	}
	ids := a.tok.Encode(msg)
	return Observation{IDs: ids, Text: msg}
}
