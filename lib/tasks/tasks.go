// Package tasks turns question-answering files into the k-objective tasks the
// rollout stage runs: k consecutive questions of one data source, each ending
// in "?", joined with "; ", their gold alias lists kept in order, under a task
// id that stays the same when the same files are converted again.
//
// Readers cover the layouts in ../shared/data: FlashRAG rows {id, question,
// golden_answers}, HotpotQA rows {question, answer}, MuSiQue rows with
// answer_aliases, 2Wiki rows {_id, question, answer}, and Search-R1 / MEM1 RL
// rows {data_source, prompt, reward_model.ground_truth, extra_info}, in JSONL,
// a JSON array, or Parquet. A Search-R1 row with no question field (its own
// data script writes the question only into the prompt) has the question read
// out of the prompt text (prompt.go).
package tasks

import (
	"fmt"
	"strings"
)

// Question is one single-objective QA item as read from a source file.
type Question struct {
	Source   string   // data source, e.g. "nq", "hotpotqa"
	ID       string   // the row's own id, or "<file>#<row>" when it has none
	Question string   // the question text as given
	Golds    []string // gold answer aliases
}

// Task is one row of a tasks file.
type Task struct {
	TaskID     string     `parquet:"task_id" json:"task_id"`
	DataSource string     `parquet:"data_source" json:"data_source"`
	K          int32      `parquet:"k" json:"k"`
	Prompt     string     `parquet:"prompt" json:"prompt"` // the k questions joined with "; "
	Questions  []string   `parquet:"questions,list" json:"questions"`
	Golds      [][]string `parquet:"golds,list" json:"golds"`
	SourceIDs  []string   `parquet:"source_ids,list" json:"source_ids"`
}

// NormalizeQuestion trims a question and makes it end in "?", as Search-R1
// and MEM1 do before joining questions.
func NormalizeQuestion(q string) string {
	q = strings.TrimSpace(q)
	if !strings.HasSuffix(q, "?") {
		q += "?"
	}
	return q
}

// Build groups questions into k-objective tasks: questions of one source in
// their file order, cut into consecutive chunks of k (a tail shorter than k is
// dropped, as MEM1 does), sources in order of first appearance, never mixed.
func Build(qs []Question, k int) ([]Task, error) {
	if k < 1 {
		return nil, fmt.Errorf("k must be at least 1, got %d", k)
	}
	var order []string
	bySource := map[string][]Question{}
	for _, q := range qs {
		if _, ok := bySource[q.Source]; !ok {
			order = append(order, q.Source)
		}
		bySource[q.Source] = append(bySource[q.Source], q)
	}
	var out []Task
	for _, src := range order {
		list := bySource[src]
		for start := 0; start+k <= len(list); start += k {
			chunk := list[start : start+k]
			t := Task{DataSource: src, K: int32(k)}
			for _, q := range chunk {
				t.Questions = append(t.Questions, NormalizeQuestion(q.Question))
				t.Golds = append(t.Golds, append([]string(nil), q.Golds...))
				t.SourceIDs = append(t.SourceIDs, q.ID)
			}
			t.Prompt = strings.Join(t.Questions, "; ")
			t.TaskID = taskID(src, k, t.SourceIDs)
			out = append(out, t)
		}
	}
	return out, nil
}

// taskID names a task by its source, k and the ids of its questions, so the
// same questions always get the same id and different chunks never collide.
// Readable ids are kept when short; long ones are shortened with a hash.
func taskID(src string, k int, ids []string) string {
	id := fmt.Sprintf("%s/k%d/%s", src, k, strings.Join(ids, "+"))
	if len(id) <= 96 {
		return id
	}
	return fmt.Sprintf("%s/k%d/%s-%016x", src, k, ids[0], fnv64(strings.Join(ids, "\x00")))
}

func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
