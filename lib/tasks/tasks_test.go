package tasks

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/testenv"
)

func TestBuildConsecutiveChunksOfOneSource(t *testing.T) {
	qs := []Question{
		{Source: "nq", ID: "1", Question: "who wrote hamlet", Golds: []string{"Shakespeare"}},
		{Source: "tq", ID: "a", Question: "Capital of France?", Golds: []string{"Paris"}},
		{Source: "nq", ID: "2", Question: " when was it written ", Golds: []string{"1600", "c. 1600"}},
		{Source: "nq", ID: "3", Question: "dropped tail", Golds: []string{"x"}},
	}
	ts, err := Build(qs, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 {
		t.Fatalf("got %d tasks, want 1 (tq has one question, nq's tail is dropped): %+v", len(ts), ts)
	}
	want := Task{
		TaskID: "nq/k2/1+2", DataSource: "nq", K: 2,
		Prompt:    "who wrote hamlet?; when was it written?",
		Questions: []string{"who wrote hamlet?", "when was it written?"},
		Golds:     [][]string{{"Shakespeare"}, {"1600", "c. 1600"}},
		SourceIDs: []string{"1", "2"},
	}
	if !reflect.DeepEqual(ts[0], want) {
		t.Fatalf("got %+v\nwant %+v", ts[0], want)
	}
	if _, err := Build(qs, 0); err == nil {
		t.Fatal("k=0 accepted")
	}
}

func TestRealLayouts(t *testing.T) {
	data := testenv.SharedData(t)
	cases := []struct {
		file, source, firstQ string
		firstGolds           []string
		n                    int
	}{
		{"nq/test-1000.jsonl", "nq", "who told the story of the prodigal son", []string{"Jesus Christ"}, 1000},
		{"popqa/test-1000.jsonl", "popqa", "Who was the composer of Easy Living?", []string{"Ralph Rainger", "Ralph Reichenthal"}, 1000},
		{"hotpotqa/dev-questions-full.jsonl", "hotpotqa/hotpot_qa", "Were Scott Derrickson and Ed Wood of the same nationality?", []string{"yes"}, 7405},
		{"hotpotqa/train-with-paragraphs.jsonl", "hotpotqa", "Party Never Ends is an album by the Romanian singer who studied at what college?", []string{"Ovidius University"}, 500},
		{"musique/train-with-paragraphs.json", "musique", "Who was the first president of the association which published Journal of Psychotherapy Integration?", []string{"G. Stanley Hall", "Stanley Hall"}, 100},
	}
	for _, c := range cases {
		qs, direct, err := ReadFile(filepath.Join(data, c.file), "auto", "")
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if len(direct) != 0 || len(qs) != c.n {
			t.Fatalf("%s: %d questions, %d direct tasks; want %d questions", c.file, len(qs), len(direct), c.n)
		}
		q := qs[0]
		if q.Source != c.source || q.Question != c.firstQ || !reflect.DeepEqual(q.Golds, c.firstGolds) {
			t.Errorf("%s: first question %+v", c.file, q)
		}
	}
}

func TestParquetRoundTripAndStableIDs(t *testing.T) {
	data := testenv.SharedData(t)
	qs, _, err := ReadFile(filepath.Join(data, "triviaqa/test-1000.jsonl"), "flashrag", "")
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := Build(qs, 3)
	if len(ts) != 333 {
		t.Fatalf("got %d tasks from 1000 questions at k=3, want 333", len(ts))
	}
	seen := map[string]bool{}
	for _, tk := range ts {
		if seen[tk.TaskID] {
			t.Fatalf("duplicate task id %s", tk.TaskID)
		}
		seen[tk.TaskID] = true
		if strings.Count(tk.Prompt, "?; ") != 2 {
			t.Fatalf("prompt %q does not join 3 questions", tk.Prompt)
		}
	}
	again, _ := Build(qs, 3)
	if !reflect.DeepEqual(ts, again) {
		t.Fatal("building twice gave different tasks")
	}
	for _, name := range []string{"tasks.parquet", "tasks.jsonl"} {
		path := filepath.Join(t.TempDir(), name)
		if err := Write(path, ts); err != nil {
			t.Fatal(err)
		}
		back, err := ReadTasks(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(back, ts) {
			t.Fatalf("%s: round trip differs: first %+v vs %+v", name, back[0], ts[0])
		}
	}
}

func TestBadRowsNameFileRowField(t *testing.T) {
	dir := t.TempDir()
	for body, want := range map[string]string{
		"{\"question\":\"q\",\"golden_answers\":[\"a\"]}\n{\"question\":\"q2\",\"golden_answers\":[]}\n": "bad.jsonl: row 2: field \"golden_answers\"",
		"{\"question\":\"q\"}\n":                     "bad.jsonl: row 1: no answer field",
		"{\"golden_answers\":[\"a\"]}\n":             "bad.jsonl: row 1: field \"question\"",
		"{\"question\":\"q\",\"answer\":3}\n":        "bad.jsonl: row 1: field \"answer\"",
		"{\"question\":\"q\",\"golden_answers\":[\n": "bad.jsonl: row 1: not a JSON object",
	} {
		path := filepath.Join(dir, "bad.jsonl")
		os.WriteFile(path, []byte(body), 0o644)
		_, _, err := ReadFile(path, "auto", "x")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("body %q: error %v, want it to contain %q", body, err, want)
		}
	}
}

func TestMultiObjectiveRowsAreTasks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mem1.jsonl")
	os.WriteFile(path, []byte(`{"data_source":"nq","question":"a?; b?","reward_model":{"ground_truth":{"target":[["x"],["y","z"]]}},"extra_info":{"index":4}}`+"\n"), 0o644)
	qs, direct, err := ReadFile(path, "auto", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 0 || len(direct) != 1 || direct[0].K != 2 || !reflect.DeepEqual(direct[0].Golds, [][]string{{"x"}, {"y", "z"}}) {
		t.Fatalf("qs %v direct %+v", qs, direct)
	}
}

func TestPythonStringList(t *testing.T) {
	got, err := pythonStringList(`['Stanley Hall', "O'Neil", 'a\'b']`)
	if err != nil || !reflect.DeepEqual(got, []string{"Stanley Hall", "O'Neil", "a'b"}) {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := pythonStringList("['open"); err == nil {
		t.Fatal("unterminated literal accepted")
	}
}
