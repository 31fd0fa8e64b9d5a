package tasks

import (
	"fmt"
	"strings"
)

// Search-R1's make_prefix (scripts/data_process/nq_search.py and the
// qa_search_*_merge.py scripts) writes rows whose only copy of the question is
// the end of the prompt text: "… For example, <answer> Beijing </answer>.
// Question: {question}\n", in a one-message chat list. MEM1 (and MemPO, which
// follows its recipe) end theirs in "Answer the following questions: {q1?;
// q2?}\n". promptMarkers are the lead-ins searched for, most specific first;
// the question is the text after the last occurrence of the first marker
// found (few-shot templates repeat "Question:" before the real one, and the
// real question always comes last).
var promptMarkers = []string{
	"Answer the following questions:",
	"Answer the following question:",
	"Questions:",
	"Question:",
}

// protocolTags mark a prompt that is an instruction template rather than a
// bare question; a template without any of promptMarkers cannot be read.
var protocolTags = []string{"<search>", "<answer>", "<think>", "<information>", "<tool_call>", "<mem>"}

// promptLookedFor says in an error what QuestionFromPrompt looks for.
const promptLookedFor = `want a top-level "question", an "extra_info.question", or a prompt whose last user message ends in ` +
	`"Question: …" (Search-R1's make_prefix), "Questions: …" or "Answer the following questions: …" (MEM1), ` +
	`or is the bare question`

// QuestionFromPrompt takes the question out of a row's prompt field: a chat
// list of {role, content} messages (the last user message is read; the last
// message when none has a role) or a plain string. A prompt holding no
// marker is taken whole when it is not an instruction template (rows whose
// user message is just the question).
func QuestionFromPrompt(p any) (string, error) {
	text, err := promptText(p)
	if err != nil {
		return "", err
	}
	for _, m := range promptMarkers {
		if i := strings.LastIndex(text, m); i >= 0 {
			q := cleanQuestion(text[i+len(m):])
			if q == "" {
				return "", fmt.Errorf("a text whose %q is followed by nothing; %s", m, promptLookedFor)
			}
			return q, nil
		}
	}
	for _, tag := range protocolTags {
		if strings.Contains(text, tag) {
			return "", fmt.Errorf("an instruction template (it holds %s) with none of the markers; %s", tag, promptLookedFor)
		}
	}
	if q := cleanQuestion(text); q != "" {
		return q, nil
	}
	return "", fmt.Errorf("an empty text; %s", promptLookedFor)
}

// promptText is the text of the message a question is read from.
func promptText(p any) (string, error) {
	switch x := p.(type) {
	case string:
		return x, nil
	case []any:
		var last, lastUser string
		found, foundUser := false, false
		for _, e := range x {
			msg, ok := e.(map[string]any)
			if !ok {
				return "", fmt.Errorf("a chat list whose element %v is not a {role, content} message; %s", e, promptLookedFor)
			}
			content, _ := msg["content"].(string)
			last, found = content, true
			if role, _ := msg["role"].(string); role == "user" {
				lastUser, foundUser = content, true
			}
		}
		switch {
		case foundUser:
			return lastUser, nil
		case found:
			return last, nil
		}
		return "", fmt.Errorf("an empty chat list; %s", promptLookedFor)
	case nil:
		return "", fmt.Errorf("missing; %s", promptLookedFor)
	}
	return "", fmt.Errorf("a %T, neither text nor a chat list; %s", p, promptLookedFor)
}

// cleanQuestion is the first non-empty line of what follows a marker, cut
// at a chat end marker: a template may put a generation cue on the lines
// after the question ("Assistant: <think>"), and questions are one line.
func cleanQuestion(s string) string {
	if i := strings.Index(s, "<|im_end|>"); i >= 0 {
		s = s[:i]
	}
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return ""
}
