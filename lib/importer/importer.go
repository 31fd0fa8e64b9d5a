// Package importer turns trajectories written as text by another system (a
// stronger model's runs, another agent framework's logs) into rollouts rows
// that mempo-update sft trains on. Each step's text is tokenized once with the
// target model's tokenizer and driven through lib/agent's own trajectory: the
// agent builds every context (task prompt, the last --keep steps, the chat
// wrapping) and renders every observation from the step's passages, exactly
// as mempo-rollout does, so SFT trains on what inference will show.
//
// One trajectory a line (JSONL), in one of two forms:
//
//	{"task_id": "…", "data_source": "nq", "questions": ["q1?", "q2?"], "golds": [["a1"], ["b1", "b2"]],
//	 "steps": [{"mem": "…", "think": "…", "search": "query", "passages": [{"id": "…", "title": "…", "text": "…"}]},
//	           {"mem": "…", "think": "…", "answer": "a1; b1"}]}
//
//	{"questions": […], "golds": […], "messages": [
//	   {"role": "system" | "user", "content": "…"},          (before the first assistant turn: ignored)
//	   {"role": "assistant", "content": "<mem>…</mem><think>…</think><search>query</search>"},
//	   {"role": "tool" | "user", "content": "…", "passages": […]},
//	   {"role": "assistant", "content": "<mem>…</mem><think>…</think><answer>…</answer>"}]}
//
// A passage is {id, title, text}, {id, contents} (wiki-18's "\"Title\"\ntext")
// or a string. In the messages form the passages of an observation are its
// "passages" field, else its content: a JSON list of passages, or text in the
// "Doc i(Title: T) text" layout (the agent's and Search-R1's), or else one
// passage. "question" (one string) may stand for "questions" at k = 1, and
// "golds" may be one list of aliases then; without questions, the messages
// form reads them from the first user message (tasks.QuestionFromPrompt).
package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"
	"time"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/rollout"
	"github.com/mempo/mempo/lib/tasks"
)

// Passage is one retrieved passage of an imported step.
type Passage struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Text     string `json:"text"`
	Contents string `json:"contents"`
}

// UnmarshalJSON accepts an object or a bare string (the passage text).
func (p *Passage) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*p = Passage{Text: s}
		return nil
	}
	type plain Passage
	var q plain
	if err := json.Unmarshal(b, &q); err != nil {
		return fmt.Errorf("want a passage object {id, title, text} or {id, contents}, or a string")
	}
	*p = Passage(q)
	return nil
}

// Step is one step of the steps form.
type Step struct {
	Mem      *string   `json:"mem"`
	Think    *string   `json:"think"`
	Search   string    `json:"search"`
	Answer   *string   `json:"answer"`
	Passages []Passage `json:"passages"`

	// The messages form: the assistant text as written, its message index,
	// and whether the observation after it was read.
	text   string
	msg    int
	obsSet bool
}

// Message is one turn of the messages form.
type Message struct {
	Role     string          `json:"role"`
	Content  string          `json:"content"`
	Passages json.RawMessage `json:"passages"`
}

// Line is one input line.
type Line struct {
	TaskID     string          `json:"task_id"`
	DataSource string          `json:"data_source"`
	Questions  []string        `json:"questions"`
	Question   string          `json:"question"`
	Golds      json.RawMessage `json:"golds"`
	Steps      []Step          `json:"steps"`
	// Messages are decoded leniently: chat logs carry more fields (name,
	// tool_call_id, …) than are read.
	Messages []json.RawMessage `json:"messages"`
}

// Importer converts lines with one agent configuration (the protocol flags
// of the rollouts the model will run: tool tag, keep, turns, topk, chat,
// hint, observation cap).
type Importer struct {
	Agent  *agent.Agent
	Tok    agent.Tokenizer
	Policy string // the rows' policy field (default "import")
}

// fieldError is an error about one field of a line.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.err.Error() }

func bad(field, format string, args ...any) error {
	return &fieldError{field: field, err: fmt.Errorf(format, args...)}
}

// ReadFile converts every line of a JSONL file; a bad line is one error
// naming the file, the line and the field.
func (im *Importer) ReadFile(path string) ([]records.Rollout, error) {
	r, err := fileio.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var rows []records.Rollout
	err = fileio.EachJSONL(r, path, func(line int, raw []byte) error {
		row, err := im.Row(raw, int64(len(rows)))
		if err != nil {
			field := ""
			if fe, ok := err.(*fieldError); ok {
				field = fe.field
			}
			return fileio.BadInput(path, line, field, "%v", err)
		}
		rows = append(rows, row)
		return nil
	})
	return rows, err
}

// Row converts one line into a rollouts row with the given group id.
func (im *Importer) Row(raw []byte, group int64) (records.Rollout, error) {
	start := time.Now()
	var ln Line
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ln); err != nil {
		return records.Rollout{}, bad("", "not a trajectory object: %v", err)
	}
	if (len(ln.Steps) > 0) == (len(ln.Messages) > 0) {
		return records.Rollout{}, bad("", `want exactly one of "steps" and "messages"`)
	}
	var steps []Step
	var err error
	if len(ln.Messages) > 0 {
		if steps, err = stepsOfMessages(&ln); err != nil {
			return records.Rollout{}, err
		}
	}
	t, err := taskOf(&ln)
	if err != nil {
		return records.Rollout{}, err
	}
	tool := im.Agent.Config().ToolTag
	tr := im.Agent.NewTrajectory(t.Questions)
	for i := range ln.Steps {
		steps = append(steps, ln.Steps[i])
	}
	for i, s := range steps {
		field := fmt.Sprintf("steps[%d]", i)
		var text string
		if s.text != "" {
			field = fmt.Sprintf("messages[%d]", s.msg)
			text = s.text
		} else {
			switch {
			case s.Mem == nil:
				return records.Rollout{}, bad(field+".mem", "missing")
			case s.Think == nil:
				return records.Rollout{}, bad(field+".think", "missing")
			case (s.Search != "") == (s.Answer != nil):
				return records.Rollout{}, bad(field, `want exactly one of "search" and "answer"`)
			}
			ans := ""
			if s.Answer != nil {
				ans = *s.Answer
			}
			text = agent.FormatStep(tool, *s.Mem, *s.Think, s.Search, ans)
		}
		res, err := tr.Step(im.Tok.Encode(text), nil)
		if err != nil {
			return records.Rollout{}, bad(field, "%v", err)
		}
		if !res.Valid {
			return records.Rollout{}, bad(field, "the step does not follow the protocol (%s): %q", res.Reason, text)
		}
		last := i == len(steps)-1
		switch {
		case res.Kind == agent.ActionAnswer && !last:
			return records.Rollout{}, bad(field, "an answer before the last step")
		case res.Kind == agent.ActionSearch && last:
			return records.Rollout{}, bad(field, "the trajectory ends with a search: its last step must answer")
		case res.Kind == agent.ActionSearch && !res.NeedSearch:
			return records.Rollout{}, bad(field, "a search at the turn limit (%d turns): raise --max-turns", im.Agent.Config().MaxTurns)
		case res.Kind == agent.ActionSearch:
			docs := make([]agent.Doc, len(s.Passages))
			for j, p := range s.Passages {
				if p.Text == "" && p.Contents == "" {
					return records.Rollout{}, bad(fmt.Sprintf("%s.passages[%d]", field, j), "no text or contents")
				}
				docs[j] = agent.Doc{ID: p.ID, Title: p.Title, Text: p.Text, Contents: p.Contents}
			}
			if err := tr.Observe(docs); err != nil {
				return records.Rollout{}, bad(field, "%v", err)
			}
		}
	}
	if !tr.Done() {
		return records.Rollout{}, bad("steps", "the trajectory did not end")
	}
	policy := im.Policy
	if policy == "" {
		policy = "import"
	}
	return rollout.Record(tr, t, group, im.Agent.Config().Keep, policy, time.Since(start)), nil
}

// taskOf is the line's task: its questions (normalized as tasks.Build does)
// and gold lists.
func taskOf(ln *Line) (tasks.Task, error) {
	qs := ln.Questions
	if len(qs) == 0 && ln.Question != "" {
		qs = []string{ln.Question}
	}
	if len(qs) == 0 {
		return tasks.Task{}, bad("questions", `missing: give "questions" (or "question")`)
	}
	var golds [][]string
	if len(ln.Golds) == 0 {
		return tasks.Task{}, bad("golds", "missing")
	}
	if err := json.Unmarshal(ln.Golds, &golds); err != nil {
		var one []string
		if err1 := json.Unmarshal(ln.Golds, &one); err1 != nil || len(qs) != 1 {
			return tasks.Task{}, bad("golds", "want one list of gold aliases per question")
		}
		golds = [][]string{one}
	}
	if len(qs) == 1 && len(golds) > 1 {
		// A joined "q1?; q2?" question with one gold list per part.
		if parts := strings.Split(qs[0], "; "); len(parts) == len(golds) {
			qs = parts
		}
	}
	if len(golds) != len(qs) {
		return tasks.Task{}, bad("golds", "%d gold lists for %d questions", len(golds), len(qs))
	}
	t := tasks.Task{DataSource: ln.DataSource, K: int32(len(qs)), Golds: golds}
	if t.DataSource == "" {
		t.DataSource = "import"
	}
	for i, q := range qs {
		if strings.TrimSpace(q) == "" {
			return tasks.Task{}, bad(fmt.Sprintf("questions[%d]", i), "empty")
		}
		if len(golds[i]) == 0 {
			return tasks.Task{}, bad(fmt.Sprintf("golds[%d]", i), "empty")
		}
		t.Questions = append(t.Questions, tasks.NormalizeQuestion(q))
	}
	t.Prompt = strings.Join(t.Questions, "; ")
	t.TaskID = ln.TaskID
	if t.TaskID == "" {
		h := fnv.New64a()
		h.Write([]byte(t.Prompt))
		t.TaskID = fmt.Sprintf("%s/k%d/%016x", t.DataSource, t.K, h.Sum64())
	}
	return t, nil
}

// stepsOfMessages turns the messages form into steps whose text is the
// assistant content itself (parsed by the agent), filling the line's
// questions from the first user message when it has none.
func stepsOfMessages(ln *Line) ([]Step, error) {
	var out []Step
	seenAssistant := false
	for i, raw := range ln.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		var m Message
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, bad(field, "not a {role, content} message: %v", err)
		}
		switch m.Role {
		case "assistant":
			seenAssistant = true
			if strings.TrimSpace(m.Content) == "" {
				return nil, bad(field+".content", "empty assistant turn")
			}
			out = append(out, Step{text: strings.TrimSpace(m.Content), msg: i})
		case "system", "user", "tool", "function", "ipython":
			if !seenAssistant {
				if m.Role == "user" && len(ln.Questions) == 0 && ln.Question == "" {
					q, err := tasks.QuestionFromPrompt(m.Content)
					if err != nil {
						return nil, bad(field+".content", "no questions given and none found in the first user message: the message is %v", err)
					}
					ln.Question = q
				}
				continue
			}
			if len(out) == 0 || out[len(out)-1].obsSet {
				return nil, bad(field, "two observations in a row")
			}
			ps, err := passagesOf(m)
			if err != nil {
				return nil, bad(field, "%v", err)
			}
			out[len(out)-1].Passages, out[len(out)-1].obsSet = ps, true
		default:
			return nil, bad(field+".role", "%q: want system, user, assistant or tool", m.Role)
		}
	}
	if len(out) == 0 {
		return nil, bad("messages", "no assistant turn")
	}
	return out, nil
}

// docLine is one passage in the "Doc i(Title: T) text" layout.
var docLine = regexp.MustCompile(`(?m)^Doc \d+\(Title: (.*?)\) (.*)$`)

// passagesOf reads the passages of an observation message.
func passagesOf(m Message) ([]Passage, error) {
	var ps []Passage
	if len(m.Passages) > 0 && string(m.Passages) != "null" {
		if err := json.Unmarshal(m.Passages, &ps); err != nil {
			return nil, fmt.Errorf("passages: %v", err)
		}
		return ps, nil
	}
	c := strings.TrimSpace(m.Content)
	if strings.HasPrefix(c, "[") {
		if err := json.Unmarshal([]byte(c), &ps); err == nil {
			return ps, nil
		}
	}
	c = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(c, "<information>"), "</information>"))
	if ms := docLine.FindAllStringSubmatch(c, -1); len(ms) > 0 {
		for _, mm := range ms {
			ps = append(ps, Passage{Title: mm[1], Text: strings.TrimSpace(mm[2])})
		}
		return ps, nil
	}
	if c == "" {
		return nil, nil
	}
	return []Passage{{Text: c}}, nil
}
