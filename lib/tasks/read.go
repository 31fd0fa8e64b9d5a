package tasks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/mempo/mempo/lib/fileio"
)

// Layouts accepted by ReadFile's from argument; "auto" looks at each row's fields.
var Layouts = []string{"auto", "flashrag", "hotpotqa", "musique", "2wiki", "searchr1"}

// ReadFile reads the questions of one QA file. source names the data source
// when rows do not carry one ("" = the file's parent directory name). Rows
// that carry k > 1 questions already (MEM1 rows, or tasks files written by
// this package) come back in direct, to be used as tasks as they are.
func ReadFile(path, from, source string) (qs []Question, direct []Task, err error) {
	if source == "" {
		source = filepath.Base(filepath.Dir(path))
		if source == "." || source == "/" {
			source = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		}
	}
	ok := false
	for _, l := range Layouts {
		ok = ok || l == from
	}
	if !ok {
		return nil, nil, fmt.Errorf("--from %q: want one of %s", from, strings.Join(Layouts, ", "))
	}
	add := func(row int, m map[string]any) error {
		q, t, err := fromRow(m, from, source, path, row)
		if err != nil {
			return err
		}
		if t != nil {
			direct = append(direct, *t)
		} else {
			qs = append(qs, q)
		}
		return nil
	}
	if strings.HasSuffix(strings.ToLower(path), ".parquet") {
		rows, err := readParquet(path)
		if err != nil {
			return nil, nil, err
		}
		for i, m := range rows {
			if err := add(i+1, m); err != nil {
				return nil, nil, err
			}
		}
		return qs, direct, nil
	}
	r, err := fileio.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
		var rows []map[string]any
		if err := json.Unmarshal(t, &rows); err != nil {
			return nil, nil, fmt.Errorf("%s: not a JSON array of objects: %v", path, err)
		}
		for i, m := range rows {
			if err := add(i+1, m); err != nil {
				return nil, nil, err
			}
		}
		return qs, direct, nil
	}
	err = fileio.EachJSONL(bytes.NewReader(data), path, func(line int, raw []byte) error {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return fileio.BadInput(path, line, "", "not a JSON object: %v", err)
		}
		return add(line, m)
	})
	return qs, direct, err
}

// fromRow maps one decoded row of any accepted layout to a question, or to a
// ready task when the row already holds several objectives.
func fromRow(m map[string]any, from, source, file string, row int) (Question, *Task, error) {
	bad := func(field, format string, args ...any) (Question, *Task, error) {
		return Question{}, nil, fileio.BadInput(file, row, field, format, args...)
	}
	if ds, ok := m["data_source"].(string); ok && ds != "" {
		source = ds
	}
	q := Question{Source: source, ID: firstString(m, "id", "_id")}
	if q.ID == "" {
		if info, ok := m["extra_info"].(map[string]any); ok {
			if idx, ok := info["index"]; ok {
				q.ID = fmt.Sprint(idx)
			}
		}
	}
	if q.ID == "" {
		q.ID = strconv.Itoa(row)
	}
	q.Question = firstString(m, "question")
	if q.Question == "" {
		if info, ok := m["extra_info"].(map[string]any); ok {
			q.Question, _ = info["question"].(string)
		}
	}
	if _, isTask := m["task_id"]; isTask && from == "auto" {
		return taskFromRow(m, file, row)
	}
	layout := from
	if layout == "auto" {
		switch {
		case m["reward_model"] != nil:
			layout = "searchr1"
		case m["golden_answers"] != nil:
			layout = "flashrag"
		case m["answer_aliases"] != nil:
			layout = "musique"
		case m["answer"] != nil:
			layout = "hotpotqa"
		default:
			return bad("", "no answer field: want golden_answers, answer, answer_aliases or reward_model.ground_truth")
		}
	}
	if q.Question == "" && m["prompt"] != nil {
		// Search-R1's own rows keep the question only inside the prompt.
		pq, err := QuestionFromPrompt(m["prompt"])
		if err != nil {
			return bad("prompt", "no question found: the row has no \"question\" and the prompt is %v", err)
		}
		q.Question = pq
	}
	if q.Question == "" {
		return bad("question", "missing or not a string (and no prompt to read it from)")
	}
	switch layout {
	case "flashrag":
		golds, err := stringList(m["golden_answers"])
		if err != nil || len(golds) == 0 {
			return bad("golden_answers", "want a non-empty list of strings")
		}
		q.Golds = golds
	case "hotpotqa", "2wiki":
		a, ok := m["answer"].(string)
		if !ok {
			return bad("answer", "missing or not a string")
		}
		q.Golds = []string{a}
	case "musique":
		a, ok := m["answer"].(string)
		if !ok {
			return bad("answer", "missing or not a string")
		}
		aliases, err := stringList(m["answer_aliases"])
		if err != nil {
			return bad("answer_aliases", "%v", err)
		}
		q.Golds = append([]string{a}, aliases...)
	case "searchr1":
		rm, _ := m["reward_model"].(map[string]any)
		gt := rm["ground_truth"]
		if g, ok := gt.(map[string]any); ok {
			gt = g["target"]
		}
		if s, ok := gt.(string); ok {
			q.Golds = []string{s}
			break
		}
		if nested, ok := gt.([]any); ok && len(nested) > 0 {
			if _, multi := nested[0].([]any); multi {
				return multiObjectiveRow(q, nested, file, row)
			}
		}
		golds, err := stringList(gt)
		if err != nil || len(golds) == 0 {
			return bad("reward_model.ground_truth", "want a string, a list of strings or {target: [...]}")
		}
		q.Golds = golds
	}
	return q, nil, nil
}

// multiObjectiveRow accepts a MEM1-style row whose ground truth holds one gold
// list per question and whose question field joins the questions with "; ".
func multiObjectiveRow(q Question, nested []any, file string, row int) (Question, *Task, error) {
	parts := strings.Split(q.Question, "; ")
	if len(parts) != len(nested) {
		return Question{}, nil, fileio.BadInput(file, row, "reward_model.ground_truth",
			"%d gold lists but the question splits into %d questions on \"; \"", len(nested), len(parts))
	}
	t := &Task{DataSource: q.Source, K: int32(len(nested))}
	for i, g := range nested {
		golds, err := stringList(g)
		if err != nil || len(golds) == 0 {
			return Question{}, nil, fileio.BadInput(file, row, "reward_model.ground_truth", "objective %d: want a non-empty list of strings", i+1)
		}
		t.Questions = append(t.Questions, NormalizeQuestion(parts[i]))
		t.Golds = append(t.Golds, golds)
		t.SourceIDs = append(t.SourceIDs, fmt.Sprintf("%s.%d", q.ID, i))
	}
	t.Prompt = strings.Join(t.Questions, "; ")
	t.TaskID = taskID(t.DataSource, len(nested), []string{q.ID})
	return Question{}, t, nil
}

// taskFromRow re-reads a row of a tasks file written by this package.
func taskFromRow(m map[string]any, file string, row int) (Question, *Task, error) {
	raw, _ := json.Marshal(m)
	var t Task
	if err := json.Unmarshal(raw, &t); err != nil {
		return Question{}, nil, fileio.BadInput(file, row, "", "not a task row: %v", err)
	}
	if err := t.Check(); err != nil {
		return Question{}, nil, fileio.BadInput(file, row, "", "%v", err)
	}
	return Question{}, &t, nil
}

// Check reports a task whose fields disagree with each other.
func (t *Task) Check() error {
	switch {
	case t.TaskID == "":
		return fmt.Errorf("task_id is empty")
	case int(t.K) != len(t.Questions) || len(t.Questions) != len(t.Golds):
		return fmt.Errorf("k=%d but %d questions and %d gold lists", t.K, len(t.Questions), len(t.Golds))
	}
	for i, g := range t.Golds {
		if len(g) == 0 {
			return fmt.Errorf("golds[%d] is empty", i)
		}
	}
	return nil
}

func firstString(m map[string]any, keys ...string) string {
	for _, k := range keys {
		switch v := m[k].(type) {
		case string:
			if v != "" {
				return v
			}
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64)
		}
	}
	return ""
}

// stringList accepts a JSON list of strings, or a string holding a Python or
// JSON list literal (MuSiQue's answer_aliases are stored as "['a', 'b']").
func stringList(v any) ([]string, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("list element %v is not a string", e)
			}
			out = append(out, s)
		}
		return out, nil
	case []string:
		return x, nil
	case string:
		return pythonStringList(x)
	}
	return nil, fmt.Errorf("want a list of strings, got %T", v)
}

// pythonStringList parses a list literal of quoted strings written by Python's
// repr or by JSON: ['a', "b's"].
func pythonStringList(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, "]") {
		return nil, fmt.Errorf("want a list literal, got %q", s)
	}
	body := s[1 : len(s)-1]
	var out []string
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == ' ' || c == ',' || c == '\t' || c == '\n':
			i++
		case c == '\'' || c == '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(body) && body[j] != c; j++ {
				if body[j] == '\\' && j+1 < len(body) {
					j++
					switch body[j] {
					case 'n':
						b.WriteByte('\n')
					case 't':
						b.WriteByte('\t')
					default:
						b.WriteByte(body[j])
					}
					continue
				}
				b.WriteByte(body[j])
			}
			if j >= len(body) {
				return nil, fmt.Errorf("unterminated string in %q", s)
			}
			out = append(out, b.String())
			i = j + 1
		default:
			return nil, fmt.Errorf("unexpected %q in list literal %q", c, s)
		}
	}
	return out, nil
}

// readParquet reads every row of a Parquet file as a map of its columns, the
// nested groups of Search-R1 rows (prompt, reward_model, extra_info) as maps
// and lists, so the same field logic serves JSON and Parquet inputs.
func readParquet(path string) ([]map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: not a readable Parquet file: %v", path, err)
	}
	r := parquet.NewGenericReader[map[string]any](pf, pf.Schema())
	defer r.Close()
	var out []map[string]any
	buf := make([]map[string]any, 64)
	for {
		for i := range buf {
			buf[i] = map[string]any{}
		}
		n, err := r.Read(buf)
		for i := 0; i < n; i++ {
			out = append(out, jsonify(buf[i]).(map[string]any))
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: row %d: %v", path, len(out)+1, err)
		}
	}
}

// jsonify round-trips a decoded Parquet value through JSON so its shapes match
// encoding/json's (map[string]any, []any, float64, string).
func jsonify(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(raw, &out) != nil {
		return v
	}
	return out
}
