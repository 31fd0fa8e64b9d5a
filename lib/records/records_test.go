package records

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/mempo/mempo/lib/fileio"
)

// sampleRollouts is a small batch with every kind of field filled: nested
// steps, null and set memory rewards, empty lists, unicode text.
func sampleRollouts() []Rollout {
	return []Rollout{
		{
			TaskID: "hotpotqa-k2-0", DataSource: "hotpotqa", K: 2, Prompt: "Q1?; Q2?",
			Questions: []string{"Were Scott Derrickson and Ed Wood of the same nationality?", "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"},
			Golds:     [][]string{{"yes"}, {"Chief of Protocol"}},
			Group:     7, Sample: 3, Policy: "ckpt-000120", Keep: "1", Seed: 42,
			Steps: []Step{
				{Index: 0, ContextIDs: []int32{151644, 872, 198}, OutputIDs: []int32{27, 10536, 29, 1, 2}, Logprobs: []float32{-0.1, -0.25, -1e-3, -2, -0.5},
					MemStart: 1, MemEnd: 3, Action: "search", Query: "Scott Derrickson nationality", DocIDs: []string{"12", "907", "33"}, Finish: "stop",
					ContextTokens: 3, OutputTokens: 5, PGoldMem: Ptr(0.25), PGoldHist: Ptr(0.125), RMem: Ptr(0.125),
					OutputText: "<mem>é</mem><search>Scott Derrickson nationality</search>", InfoText: "Doc 1(Title: Scott Derrickson) …"},
				{Index: 1, ContextIDs: []int32{151644, 5}, OutputIDs: []int32{9, 9}, Logprobs: []float32{-0.5, -0.75},
					MemStart: -1, MemEnd: -1, Action: "answer", DocIDs: []string{}, ContextTokens: 2, OutputTokens: 2},
			},
			Answer: "yes; Chief of Protocol", Answers: []string{"yes", "Chief of Protocol"}, FormatOK: true,
			RewardTask: 1, EM: []float64{1, 1}, F1: []float64{1, 1}, Turns: 2, TotalTokens: 12, PeakTokens: 8, WallS: 1.5,
		},
		{
			TaskID: "nq-k1-3", DataSource: "nq", K: 1, Questions: []string{"who told the story of the prodigal son?"},
			Golds: [][]string{{"Jesus Christ"}}, Group: 8, Sample: 0, Policy: "ckpt-000120", Keep: "all",
			Steps:  []Step{},
			Answer: "", Answers: []string{}, FormatOK: false, Failure: "no_answer",
			EM: []float64{0}, F1: []float64{0}, Turns: 16, TotalTokens: 0, PeakTokens: 0,
		},
	}
}

// canon makes nil and empty slices compare equal (JSON and Parquet do not
// keep the difference).
func canon(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "null", "N")
}

func TestRoundTrip(t *testing.T) {
	want := sampleRollouts()
	for _, ext := range []string{".parquet", ".jsonl"} {
		path := filepath.Join(t.TempDir(), "rollouts"+ext)
		if err := WriteFile(path, want); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile[Rollout](path)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d rows", ext, len(got))
		}
		if got[1].Steps == nil {
			got[1].Steps = []Step{}
		}
		for i := range want {
			if canon(t, got[i]) != canon(t, want[i]) {
				t.Errorf("%s row %d:\n got %s\nwant %s", ext, i+1, canon(t, got[i]), canon(t, want[i]))
			}
		}
		if got[0].Steps[1].PGoldMem != nil || *got[0].Steps[0].RMem != 0.125 {
			t.Errorf("%s: optional columns did not round-trip: %+v", ext, got[0].Steps)
		}
	}
	ups := []Update{{Step: 1, Policy: "ckpt-1", Loss: 0.5, RewardTaskMean: 0.25, PeakTokensMean: 900}, {Step: 2, Loss: 0.4}}
	scores := []Score{{Run: "mempo", DataSource: "hotpotqa", K: 2, Metric: "f1", Value: 56.47, CILow: 50, CIHigh: 60, N: 128}}
	for _, ext := range []string{".parquet", ".jsonl"} {
		dir := t.TempDir()
		if err := WriteFile(filepath.Join(dir, "m"+ext), ups); err != nil {
			t.Fatal(err)
		}
		gu, err := ReadFile[Update](filepath.Join(dir, "m"+ext))
		if err != nil || !reflect.DeepEqual(gu, ups) {
			t.Errorf("updates %s: %v %+v", ext, err, gu)
		}
		if err := WriteFile(filepath.Join(dir, "s"+ext), scores); err != nil {
			t.Fatal(err)
		}
		gs, err := ReadFile[Score](filepath.Join(dir, "s"+ext))
		if err != nil || !reflect.DeepEqual(gs, scores) {
			t.Errorf("scores %s: %v %+v", ext, err, gs)
		}
	}
}

// TestParquetLayout checks that lists use the standard three-level LIST
// encoding pyarrow expects (list / element), nested to any depth.
func TestParquetLayout(t *testing.T) {
	s := parquet.SchemaOf(Rollout{})
	var paths []string
	for _, p := range s.Columns() {
		paths = append(paths, strings.Join(p, "."))
	}
	all := strings.Join(paths, " ")
	for _, want := range []string{
		"golds.list.element.list.element",
		"steps.list.element.context_ids.list.element",
		"steps.list.element.p_gold_mem",
		"steps.list.element.p_gold_mem_obj.list.element",
		"answers.list.element",
	} {
		if !strings.Contains(" "+all+" ", " "+want+" ") {
			t.Errorf("no column %s in %s", want, all)
		}
	}
}

func TestWriterIsAtomicAndRefusesBadRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	rows := sampleRollouts()
	rows[1].Golds = nil
	err := WriteFile(path, rows)
	if err == nil || err.Error() != path+`: row 2: field "golds": has 0 gold lists for k = 1` {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("a failed write left a file behind")
	}
}

func TestMalformedJSONLNamesRow(t *testing.T) {
	good, _ := json.Marshal(sampleRollouts()[0])
	for _, tc := range []struct{ line, want string }{
		{`{"task_id": "x", "k": 1`, `row 2: not valid JSON`},
		{`{"task_id": "x", "k": "two"}`, `row 2: field "k": cannot hold JSON string`},
		{`{"task_id": "x", "k": 1, "golds": [["a"]], "anwser": "a"}`, `row 2: field "anwser": is not a column`},
		{`{"task_id": "x", "k": 2, "golds": [["a"]]}`, `row 2: field "golds": has 1 gold lists for k = 2`},
		{`{"task_id": "x", "k": 1, "golds": [["a"]], "steps": [{"mem_start": 4, "mem_end": 2}]}`, `row 2: field "steps[0].mem_start"`},
		{`{"task_id": "x", "k": 1, "golds": [["a"]], "steps": [{"mem_start": -1, "mem_end": -1, "p_gold_mem": 1.5}]}`, `row 2: field "steps[0].p_gold_mem"`},
	} {
		path := filepath.Join(t.TempDir(), "bad.jsonl")
		os.WriteFile(path, []byte(string(good)+"\n"+tc.line+"\n"+string(good)+"\n"), 0o644)
		_, err := ReadFile[Rollout](path)
		var ie *fileio.InputError
		if err == nil || !errors.As(err, &ie) || !strings.Contains(err.Error(), path+": "+tc.want) {
			t.Errorf("line %s: err = %v, want %q", tc.line, err, tc.want)
		}
	}
}

// rawRollout has Rollout's columns but no validation, to write bad Parquet.
type rawRollout struct {
	TaskID string     `parquet:"task_id"`
	K      int32      `parquet:"k"`
	Golds  [][]string `parquet:"golds,list"`
	Answer string     `parquet:"answer"`
}

func TestMalformedParquetNamesRow(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.parquet")
	rows := []rawRollout{{"a", 1, [][]string{{"x"}}, "x"}, {"b", 1, [][]string{{"x"}}, "y"}, {"c", 2, [][]string{{"x"}}, "x"}}
	if err := parquet.WriteFile(path, rows); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := Each(path, func(int, *Rollout) error { n++; return nil })
	if err == nil || err.Error() != path+`: row 3: field "golds": has 1 gold lists for k = 2` || n != 2 {
		t.Fatalf("err = %v after %d rows", err, n)
	}
	type noGolds struct {
		TaskID string `parquet:"task_id"`
	}
	if err := parquet.WriteFile(filepath.Join(dir, "cols.parquet"), []noGolds{{"a"}}); err != nil {
		t.Fatal(err)
	}
	_, err = ReadFile[Rollout](filepath.Join(dir, "cols.parquet"))
	if err == nil || !strings.Contains(err.Error(), `field "k": required column is missing`) {
		t.Fatalf("missing column: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "junk.parquet"), []byte("not parquet at all"), 0o644)
	if _, err := ReadFile[Rollout](filepath.Join(dir, "junk.parquet")); err == nil || !strings.Contains(err.Error(), "not a Parquet file") {
		t.Fatalf("junk: %v", err)
	}
}

// IDs and IDs32 convert between a Step's int32 ids and the tokenizer's []int
// both ways, and a step without ids gives nil (what an absent observation is).
func TestIDsRoundTrip(t *testing.T) {
	ids := []int{0, 7, 151643, 2147483647}
	if got := IDs(IDs32(ids)); !slices.Equal(got, ids) {
		t.Fatalf("IDs(IDs32(%v)) = %v", ids, got)
	}
	if got := IDs([]int32{}); got != nil {
		t.Fatalf("IDs of no ids = %#v, want nil", got)
	}
}

// TestPerObjectiveTerms: the per-objective memory-reward terms survive both
// formats, and the row checks name a bad one.
func TestPerObjectiveTerms(t *testing.T) {
	rows := sampleRollouts()
	st := &rows[0].Steps[0]
	st.PGoldMemObj, st.PGoldHistObj = []float64{0.75, 0.125}, []float64{0.5, 0.25}
	for _, ext := range []string{".parquet", ".jsonl"} {
		path := filepath.Join(t.TempDir(), "r"+ext)
		if err := WriteFile(path, rows); err != nil {
			t.Fatal(err)
		}
		back, err := ReadFile[Rollout](path)
		if err != nil {
			t.Fatal(err)
		}
		g := back[0].Steps[0]
		if !reflect.DeepEqual(g.PGoldMemObj, st.PGoldMemObj) || !reflect.DeepEqual(g.PGoldHistObj, st.PGoldHistObj) {
			t.Errorf("%s: per-objective terms read back as %v, %v", ext, g.PGoldMemObj, g.PGoldHistObj)
		}
		for i := range back {
			for k, st := range back[i].Steps {
				if n := len(st.PGoldMemObj); (i != 0 || k != 0) && n != 0 {
					t.Errorf("%s: row %d step %d, written without them, read back %d", ext, i, k, n)
				}
			}
		}
	}
	st.PGoldHistObj = []float64{0.5}
	if err := rows[0].Validate(); err == nil || !strings.Contains(err.Error(), "objectives where p_gold_mem_obj") {
		t.Errorf("ragged terms: %v", err)
	}
	st.PGoldHistObj = []float64{0.5, 1.5}
	if err := rows[0].Validate(); err == nil || !strings.Contains(err.Error(), "not a probability") {
		t.Errorf("a term above 1: %v", err)
	}
}
