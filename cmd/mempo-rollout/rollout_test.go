package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/retrieval"
	"github.com/mempo/mempo/lib/rollout"
	"github.com/mempo/mempo/lib/tasks"
	"github.com/mempo/mempo/lib/testenv"
	"github.com/mempo/mempo/lib/tokenizer"
)

// asMain makes the test binary act as mempo-rollout (testenv.CommandMain),
// with the scripted policy slowed down by MEMPO_ROLLOUT_DELAY, so a test can
// kill it with SIGKILL mid-run.
var asMain = envconfig.RolloutAsMain.Name

func TestMain(m *testing.M) {
	testenv.CommandMain(m, "mempo-rollout", asMain, func() {
		d, _ := time.ParseDuration(envconfig.RolloutDelay.Get())
		useScripted(d)
		main()
	}, func() {
		if roFix.dir != "" {
			os.RemoveAll(roFix.dir)
		}
	})
}

// The file-in/file-out cases of testdata/cases (bad flags: one stderr line,
// exit 1).
func TestCases(t *testing.T) { testenv.RunCases(t, asMain) }

// roScript searches the question at the first turn, then answers with a
// number drawn from the request's seed (so rows show whether a resumed run
// used the same per-(task, sample, turn) seeds); sample 2 never uses tags.
func roScript(prompt string, sample int, seed uint64) string {
	sample, turn := testenv.MarkedTurn(prompt, sample)
	mem := testenv.MarkedMemory(sample, turn, fmt.Sprintf("seed %d", seed%1000))
	switch {
	case sample == 2:
		return "no tags here"
	case turn == 0:
		q := "question"
		if i := strings.Index(prompt, "Question"); i >= 0 {
			q = strings.Fields(prompt[i:])[1]
		}
		return mem + "<think>look</think><search>" + q + " " + strconv.FormatUint(seed%97, 10) + "</search>"
	}
	return mem + "<think>done</think><answer>" + strconv.FormatUint(seed%1000, 10) + "</answer>"
}

func useScripted(delay time.Duration) {
	loadPolicy = func(dir, adapter, device string, tok agent.Tokenizer) (policyInfo, error) {
		if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
			return policyInfo{}, fmt.Errorf("%s: no config.json", dir)
		}
		return policyInfo{Policy: &rollout.Scripted{Tok: tok, Script: roScript, EOS: 0, Delay: delay}, EOS: []int{0}, Vocab: 1 << 20}, nil
	}
}

var roFix struct {
	sync.Once
	dir, index, tasks, model string
	n                        int
	err                      error
}

// roFixture builds a BM25 index over the paragraphs of the first 16 rows of
// the shared HotpotQA dev file, a tasks file of those rows (k = 1) and a
// model directory (a random-weight tiny Qwen2 over the small BPE
// vocabulary). It skips when ../shared/data is absent.
func roFixture(t *testing.T) (index, tasksFile, modelDir string, n int) {
	t.Helper()
	src := filepath.Join("..", "..", "..", "shared", "data", "hotpotqa", "dev-with-paragraphs-a.jsonl")
	if _, err := os.Stat(src); err != nil {
		t.Skipf("real data not present: %s (the shared HotpotQA paragraphs beside the repository)", src)
	}
	f := &roFix
	f.Do(func() {
		f.err = func() error {
			dir, err := os.MkdirTemp("", "mempo-rollout-cmd-")
			if err != nil {
				return err
			}
			f.dir = dir
			raw, err := os.ReadFile(src)
			if err != nil {
				return err
			}
			lines := bytes.SplitN(raw, []byte("\n"), 17)[:16]
			slice := filepath.Join(dir, "hotpotqa", "slice.jsonl")
			os.MkdirAll(filepath.Dir(slice), 0o755)
			if err := os.WriteFile(slice, append(bytes.Join(lines, []byte("\n")), '\n'), 0o644); err != nil {
				return err
			}
			var corpus bytes.Buffer
			if _, err := retrieval.ConvertCorpus(retrieval.FromHotpotQA, []string{slice}, &corpus); err != nil {
				return err
			}
			cp := filepath.Join(dir, "corpus.jsonl")
			os.WriteFile(cp, corpus.Bytes(), 0o644)
			f.index = filepath.Join(dir, "index")
			if _, err := retrieval.Build(context.Background(), retrieval.BuildOptions{Corpus: cp, Out: f.index, Analyzer: retrieval.DefaultAnalyzer}); err != nil {
				return err
			}
			qs, _, err := tasks.ReadFile(slice, "hotpotqa", "hotpotqa")
			if err != nil {
				return err
			}
			ts, err := tasks.Build(qs, 1)
			if err != nil {
				return err
			}
			f.n = len(ts)
			f.tasks = filepath.Join(dir, "tasks.jsonl")
			if err := tasks.Write(f.tasks, ts); err != nil {
				return err
			}
			cfg, err := checkpoint.Preset("tiny")
			if err != nil {
				return err
			}
			cfg.VocabSize = 512
			bos := 0
			cfg.BOSTokenID, cfg.EOSTokenIDs, cfg.Generation = &bos, []int{0}, nil
			f.model = filepath.Join(dir, "tiny")
			return checkpoint.Save(f.model, cfg, checkpoint.RandomInit(cfg, 5), checkpoint.SaveOptions{TokenizerDir: "../../testdata/tokenizer/small-bpe.json"})
		}()
	})
	if f.err != nil {
		t.Fatal(f.err)
	}
	return f.index, f.tasks, f.model, f.n
}

func runRoot(args ...string) error {
	return newApp().Run(append([]string{"mempo-rollout"}, args...))
}

func readRows(t *testing.T, path string) []records.Rollout {
	t.Helper()
	rows, err := records.ReadFile[records.Rollout](path)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// A random-weight model sampling for real through the command: 2 tasks × G
// = 2, a file records.ReadFile reads, contexts that follow the protocol, and
// a readable JSONL copy.
func TestRolloutCommandTinyModel(t *testing.T) {
	index, tasksFile, modelDir, _ := roFixture(t)
	dir := t.TempDir()
	out, copyPath, tb := filepath.Join(dir, "r.parquet"), filepath.Join(dir, "r.jsonl"), filepath.Join(dir, "tb")
	err := runRoot("--model", modelDir, "--tasks", tasksFile, "--index", index, "--group", "2", "--limit", "2",
		"--max-step-tokens", "8", "--max-turns", "2", "--on-invalid", "correct", "--seed", "3", "--out", out, "--jsonl", copyPath, "--tb", tb)
	if err != nil {
		t.Fatal(err)
	}
	rows := readRows(t, out)
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rows))
	}
	checkRolloutTB(t, tb, rows)
	tok := loadTok(t, modelDir)
	cfg := agent.DefaultConfig()
	cfg.MaxTurns, cfg.MaxStepTokens, cfg.OnInvalid, cfg.EOSIDs = 2, 8, agent.CorrectOnInvalid, []int{0}
	ag, err := agent.New(cfg, tok)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		if r.Group != int64(i/2) || r.Sample != int32(i%2) || !strings.HasPrefix(r.Policy, "tiny@") || r.Keep != "1" {
			t.Errorf("row %d: group %d sample %d policy %q keep %q", i, r.Group, r.Sample, r.Policy, r.Keep)
		}
		if err := ag.CheckRecord(r.Questions, rollout.StepRecords(&r)); err != nil {
			t.Errorf("row %d: %v", i, err)
		}
		for _, s := range r.Steps {
			if len(s.OutputIDs) == 0 || len(s.OutputIDs) > 8 || len(s.Logprobs) != len(s.OutputIDs) || len(s.SampleLogprobs) != len(s.OutputIDs) {
				t.Errorf("row %d: step with %d ids, %d/%d log-probs", i, len(s.OutputIDs), len(s.Logprobs), len(s.SampleLogprobs))
			}
		}
	}
	copyRows := readRows(t, copyPath)
	if len(copyRows) != 4 || copyRows[0].Steps[0].ContextText == "" || !strings.Contains(copyRows[0].Steps[0].ContextText, rows[0].Questions[0]) {
		t.Errorf("JSONL copy lacks the decoded context")
	}
	if _, err := os.Stat(out + ".partial"); !os.IsNotExist(err) {
		t.Errorf("journal left behind: %v", err)
	}
}

// TestRolloutCommandKVBound: a bound below what a call would reserve
// (--max-batch-tokens 1: every call at the least it may take, the first
// turn's four samples of a task growing their KV cache as they write
// 100-token steps and preempting each other) samples the same trajectories as no bound, and says so in
// TensorBoard (rows preempted, the most positions in use below the
// reservation).
func TestRolloutCommandKVBound(t *testing.T) {
	index, tasksFile, modelDir, _ := roFixture(t)
	dir := t.TempDir()
	run := func(name string, extra ...string) ([]records.Rollout, map[string]float64) {
		out, tb := filepath.Join(dir, name+".parquet"), filepath.Join(dir, name+"-tb")
		args := append([]string{"--model", modelDir, "--tasks", tasksFile, "--index", index, "--group", "4", "--limit", "2",
			"--max-step-tokens", "100", "--max-turns", "2", "--on-invalid", "correct", "--seed", "5", "--out", out, "--tb", tb}, extra...)
		if err := runRoot(args...); err != nil {
			t.Fatal(err)
		}
		evs, _ := testenv.EventFile(t, tb)
		last := map[string]float64{}
		for _, ev := range evs[1:] {
			for _, s := range ev.Scalars {
				last[s.Tag] = s.Value
			}
		}
		return readRows(t, out), last
	}
	want, free := run("free")
	got, bound := run("bound", "--max-batch-tokens", "1")
	if len(got) != len(want) || len(want) != 8 {
		t.Fatalf("%d rows bound, %d free, want 8", len(got), len(want))
	}
	long := 0
	for i := range want {
		if len(got[i].Steps) != len(want[i].Steps) {
			t.Fatalf("row %d: %d steps bound, %d free", i, len(got[i].Steps), len(want[i].Steps))
		}
		for j, s := range want[i].Steps {
			g := got[i].Steps[j]
			if !slices.Equal(g.OutputIDs, s.OutputIDs) || !slices.Equal(g.ContextIDs, s.ContextIDs) {
				t.Fatalf("row %d step %d: the bound changed the sample", i, j)
			}
			for k := range s.Logprobs {
				if math.Abs(float64(g.Logprobs[k]-s.Logprobs[k])) > 1e-4 {
					t.Fatalf("row %d step %d token %d: log-prob %g bound, %g free", i, j, k, g.Logprobs[k], s.Logprobs[k])
				}
			}
			if len(s.OutputIDs) > 64 {
				long++
			}
		}
	}
	if long == 0 {
		t.Fatal("no step wrote past a first slot of 64 tokens: the case does not grow slots")
	}
	if free["rollout/preempted_rows"] != 0 || !(bound["rollout/preempted_rows"] > 0) || bound["rollout/generate_calls"] <= free["rollout/generate_calls"] ||
		!(bound["rollout/kv_cache_positions_peak"] < free["rollout/kv_cache_positions_peak"]) {
		t.Errorf("TensorBoard: bound %v, free %v", bound, free)
	}
}

func loadTok(t *testing.T, dir string) rollout.Tok {
	t.Helper()
	tk, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return rollout.Tok{T: tk}
}

// Kill -9 in the middle, rerun: every trajectory exactly once, the same as
// an uninterrupted run.
func TestRolloutKillAndResume(t *testing.T) {
	index, tasksFile, modelDir, n := roFixture(t)
	useScripted(0)
	defer func() { loadPolicy = realLoadPolicy }()
	dir := t.TempDir()
	args := func(out string) []string {
		return []string{"--model", modelDir, "--tasks", tasksFile, "--index", index, "--group", "3", "--batch", "3",
			"--seed", "42", "--out", out, "--max-turns", "4"}
	}
	ref := filepath.Join(dir, "ref.parquet")
	if err := runRoot(args(ref)...); err != nil {
		t.Fatal(err)
	}
	want := readRows(t, ref)
	if len(want) != 3*n {
		t.Fatalf("reference run: %d rows, want %d", len(want), 3*n)
	}

	out := filepath.Join(dir, "r.parquet")
	journal := out + ".partial"
	cmd := testenv.Command(asMain, args(out)...)
	cmd.Env = append(cmd.Env, envconfig.RolloutDelay.Name+"=60ms")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ents, _ := filepath.Glob(filepath.Join(journal, "task-*.parquet"))
		if len(ents) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no tasks journaled in time; stderr: %s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Kill() // SIGKILL
	cmd.Wait()
	journaled, _ := filepath.Glob(filepath.Join(journal, "task-*.parquet"))
	if len(journaled) >= n {
		t.Fatalf("the run finished (%d tasks journaled) before the kill; slow it down", len(journaled))
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("output exists after a kill: %v", err)
	}
	// Rerun as a fresh process.
	cmd = testenv.Command(asMain, args(out)...)
	stderr.Reset()
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("rerun: %v: %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), fmt.Sprintf("(%d resumed)", len(journaled))) {
		t.Errorf("summary does not count %d resumed tasks: %s", len(journaled), stderr.String())
	}
	got := readRows(t, out)
	if len(got) != len(want) {
		t.Fatalf("%d rows after resume, want %d", len(got), len(want))
	}
	seen := map[[2]int64]bool{}
	for i := range got {
		k := [2]int64{got[i].Group, int64(got[i].Sample)}
		if seen[k] {
			t.Fatalf("trajectory %v twice", k)
		}
		seen[k] = true
		a, b := got[i], want[i]
		a.WallS, b.WallS = 0, 0
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("row %d (task %d sample %d) differs from the uninterrupted run", i, a.Group, a.Sample)
		}
	}
	if _, err := os.Stat(journal); !os.IsNotExist(err) {
		t.Errorf("journal left behind")
	}
	// A finished run is not redone.
	if err := runRoot(args(out)...); err != nil {
		t.Fatal(err)
	}
}

var realLoadPolicy = loadPolicy

func TestRolloutBadInput(t *testing.T) {
	index, tasksFile, modelDir, _ := roFixture(t)
	useScripted(0)
	defer func() { loadPolicy = realLoadPolicy }()
	dir := t.TempDir()
	out := filepath.Join(dir, "r.parquet")
	os.WriteFile(out, []byte("precious"), 0o644)
	os.MkdirAll(out+".partial", 0o755) // an unfinished run, so the command does not stop at "nothing to do"
	base := func(extra ...string) []string {
		return append([]string{"--model", modelDir, "--tasks", tasksFile, "--index", index, "--group", "2", "--out", out}, extra...)
	}
	badTasks := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(badTasks, []byte(`{"task_id":"a","k":1,"questions":["q?"],"golds":[["x"]]}`+"\n"+`{"task_id":"b","k":2,"questions":["q?"],"golds":[["x"]]}`+"\n"), 0o644)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--model", filepath.Join(dir, "none"), "--tasks", tasksFile, "--index", index, "--out", out}, "none: not a model directory"},
		{[]string{"--model", modelDir, "--tasks", badTasks, "--index", index, "--out", out}, "bad.jsonl: row 2"},
		{[]string{"--model", modelDir, "--tasks", tasksFile, "--retriever", "http://127.0.0.1:9", "--out", out}, "--retriever http://127.0.0.1:9"},
		{[]string{"--model", modelDir, "--tasks", tasksFile, "--out", out}, "exactly one of --retriever"},
		{base("--keep", "x"), "--keep"},
		{base("--group", "0"), "--group"},
		{base("--task-reward", "partial"), "--task-reward"},
		{base("--kv-gib", "-1"), "--kv-gib: -1"},
		{base("--jsonl", filepath.Join(dir, "c.parquet")), "--jsonl"},
		{[]string{"--model", modelDir, "--tasks", tasksFile, "--index", filepath.Join(dir, "noindex"), "--out", out}, "--index"},
	}
	for _, c := range cases {
		err := runRoot(c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want one line naming %q", c.args, err, c.want)
		}
	}
	if b, _ := os.ReadFile(out); string(b) != "precious" {
		t.Error("an existing output was damaged")
	}
	// A journal from a run with other settings is not resumed.
	os.RemoveAll(out + ".partial")
	os.MkdirAll(out+".partial", 0o755)
	os.WriteFile(filepath.Join(out+".partial", "run.json"), []byte(`{
  "seed": "99"
}
`), 0o644)
	if err := runRoot(base()...); err == nil || !strings.Contains(err.Error(), "the unfinished run there has") || !strings.Contains(err.Error(), "to start over") {
		t.Errorf("mismatched journal: %v", err)
	}
}

// The same run through a retrieval server (--retriever URL) and in process
// (--index DIR) gives the same rows.
func TestRolloutRetrieverURLMatchesIndex(t *testing.T) {
	index, tasksFile, modelDir, _ := roFixture(t)
	useScripted(0)
	defer func() { loadPolicy = realLoadPolicy }()
	ix, err := retrieval.Open(index)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	srv := retrieval.NewServer(ix, retrieval.ServerConfig{})
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.parquet"), filepath.Join(dir, "b.parquet")
	common := []string{"--model", modelDir, "--tasks", tasksFile, "--group", "3", "--limit", "4", "--seed", "5"}
	if err := runRoot(append(common, "--index", index, "--out", a)...); err != nil {
		t.Fatal(err)
	}
	if err := runRoot(append(common, "--retriever", hs.URL, "--out", b)...); err != nil {
		t.Fatal(err)
	}
	ra, rb := readRows(t, a), readRows(t, b)
	if len(ra) != 12 || len(rb) != 12 {
		t.Fatalf("%d and %d rows", len(ra), len(rb))
	}
	searched := 0
	for i := range ra {
		ra[i].WallS, rb[i].WallS = 0, 0
		if !reflect.DeepEqual(ra[i], rb[i]) {
			for j := range ra[i].Steps {
				sa, sb := ra[i].Steps[j], rb[i].Steps[j]
				t.Logf("step %d: docs %v / %v\ninfo %q\n/ %q", j, sa.DocIDs, sb.DocIDs, sa.InfoText, sb.InfoText)
			}
			t.Fatalf("row %d differs between --index and --retriever", i)
		}
		for _, s := range ra[i].Steps {
			searched += len(s.DocIDs)
		}
	}
	if searched == 0 {
		t.Fatal("no step retrieved anything")
	}
}

// Ctrl-C (SIGINT) ends the run after the turn in flight with one line that
// says how to resume; the journal then resumes to the full file.
func TestRolloutInterruptResumes(t *testing.T) {
	index, tasksFile, modelDir, n := roFixture(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "r.parquet")
	args := []string{"--model", modelDir, "--tasks", tasksFile, "--index", index, "--group", "2", "--batch", "2", "--out", out}
	cmd := testenv.Command(asMain, args...)
	cmd.Env = append(cmd.Env, envconfig.RolloutDelay.Name+"=60ms")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if ents, _ := filepath.Glob(filepath.Join(out+".partial", "task-*.parquet")); len(ents) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("nothing journaled in time: %s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	msg := strings.TrimSpace(stderr.String())
	if err == nil || strings.Contains(msg, "\n") || !strings.Contains(msg, "interrupted after") || !strings.Contains(msg, "rerun the same command to resume") {
		t.Fatalf("exit %v, stderr %q", err, msg)
	}
	cmd = testenv.Command(asMain, args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("resume: %v: %s", err, b)
	}
	if rows := readRows(t, out); len(rows) != 2*n {
		t.Fatalf("%d rows after resume, want %d", len(rows), 2*n)
	}
}
