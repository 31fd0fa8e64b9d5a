package importer

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/retrieval"
	"github.com/mempo/mempo/lib/rollout"
	"github.com/mempo/mempo/lib/tasks"
	"github.com/mempo/mempo/lib/testenv"
	"github.com/mempo/mempo/lib/tokenizer"
)

func qwen(t *testing.T) (string, rollout.Tok) {
	t.Helper()
	for _, p := range []string{os.Getenv("QWEN_TOKENIZER"), filepath.Join(testenv.RepoRoot(t), "testdata", "qwen3", "tokenizer.json")} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			tk, err := tokenizer.Load(p)
			if err != nil {
				t.Fatal(err)
			}
			return p, rollout.Tok{T: tk}
		}
	}
	t.Skip("the Qwen tokenizer fixture is absent (make fixtures-tokenizer)")
	return "", rollout.Tok{}
}

// The trajectory both tests use: two questions, two searches, an answer.
var (
	hamletPassages = []Passage{
		{ID: "12", Contents: "\"Hamlet\"\nHamlet is a tragedy written by William Shakespeare sometime between 1599 and 1601."},
		{ID: "13", Title: "Elsinore", Text: "Kronborg castle at Helsingør is the Elsinore of Hamlet."},
		{ID: "14", Title: "Ophelia", Text: "Ophelia is a character in Hamlet."},
	}
	parisPassages = []Passage{{ID: "7", Title: "Paris", Text: "Paris is the capital and largest city of France."}}
	steps         = []map[string]any{
		{"mem": "nothing found yet", "think": "search question 1", "search": "hamlet author", "passages": hamletPassages},
		{"mem": "[1] William Shakespeare", "think": "now question 2", "search": "capital of france", "passages": parisPassages},
		{"mem": "[1] William Shakespeare; [2] Paris", "think": "both are known", "answer": "William Shakespeare; Paris"},
	}
)

func stepsLine(t *testing.T) []byte {
	raw, err := json.Marshal(map[string]any{
		"task_id": "demo/k2/1", "data_source": "demo", "questions": []string{"who wrote hamlet", "what is the capital of france?"},
		"golds": [][]string{{"William Shakespeare", "Shakespeare"}, {"Paris"}}, "steps": steps,
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// fixedSearcher answers each query with the passages of the imported step
// that searched it.
type fixedSearcher map[string][]Passage

func (f fixedSearcher) Search(_ context.Context, queries []string, topk int) ([][]retrieval.Hit, error) {
	out := make([][]retrieval.Hit, len(queries))
	for i, q := range queries {
		for _, p := range f[q] {
			c := p.Contents
			if c == "" {
				// The engine passes Title and Contents; a passage with a
				// title and a text is stored as wiki-18 contents.
				c = "\"" + p.Title + "\"\n" + p.Text
			}
			out[i] = append(out[i], retrieval.Hit{ID: p.ID, Contents: c})
		}
	}
	return out, nil
}

// TestImportedContextsAreTheRolloutsOwn imports a trajectory and runs the
// same steps through the rollout engine (a scripted policy writing the same
// step texts, a searcher returning the same passages), under keep 1 and keep
// all: every step's context, output, observation and memory span must be
// the same ids.
func TestImportedContextsAreTheRolloutsOwn(t *testing.T) {
	_, tok := qwen(t)
	texts := []string{
		agent.FormatStep("search", "nothing found yet", "search question 1", "hamlet author", ""),
		agent.FormatStep("search", "[1] William Shakespeare", "now question 2", "capital of france", ""),
		agent.FormatStep("search", "[1] William Shakespeare; [2] Paris", "both are known", "", "William Shakespeare; Paris"),
	}
	for _, keep := range []string{"1", "all"} {
		cfg := agent.DefaultConfig()
		cfg.TopK, cfg.MaxTurns, cfg.MaxStepTokens = 2, 5, 256
		cfg.Keep, _ = agent.ParseKeep(keep)
		ag, err := agent.New(cfg, tok)
		if err != nil {
			t.Fatal(err)
		}
		im := &Importer{Agent: ag, Tok: tok}
		got, err := im.Row(stepsLine(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		if got.RewardTask != 1 || !got.FormatOK || len(got.Steps) != 3 || got.Keep != keep {
			t.Fatalf("keep %s: imported row reward %g format %v, %d steps", keep, got.RewardTask, got.FormatOK, len(got.Steps))
		}
		if err := ag.CheckRecord(got.Questions, rollout.StepRecords(&got)); err != nil {
			t.Fatalf("keep %s: %v", keep, err)
		}

		call := 0
		pol := &rollout.Scripted{Tok: tok, EOS: -1, Script: func(string, int, uint64) string {
			call++
			return texts[call-1]
		}}
		srch := fixedSearcher{"hamlet author": hamletPassages, "capital of france": parisPassages}
		e := &rollout.Engine{Agent: ag, Policy: pol, Searcher: srch, Opts: rollout.Options{
			GroupSize: 1, Batch: 1, Decode: tok.Decode, PolicyID: "scripted",
		}}
		task := tasks.Task{TaskID: got.TaskID, DataSource: got.DataSource, K: 2, Prompt: got.Prompt, Questions: got.Questions, Golds: got.Golds}
		var want []records.Rollout
		if _, err := e.Run(context.Background(), []rollout.Job{{Group: 0, Task: task}}, func(_ rollout.Job, rs []records.Rollout) error {
			want = append(want, rs...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(want) != 1 || len(want[0].Steps) != 3 {
			t.Fatalf("keep %s: the engine wrote %d rows", keep, len(want))
		}
		for i := range got.Steps {
			g, w := got.Steps[i], want[0].Steps[i]
			if !reflect.DeepEqual(g.ContextIDs, w.ContextIDs) || !reflect.DeepEqual(g.OutputIDs, w.OutputIDs) ||
				!reflect.DeepEqual(g.ObsIDs, w.ObsIDs) || g.MemStart != w.MemStart || g.MemEnd != w.MemEnd ||
				!reflect.DeepEqual(g.DocIDs, w.DocIDs) {
				t.Fatalf("keep %s step %d: imported and rolled out differ:\nimported context %q\nrollout  context %q\nimported obs %q\nrollout  obs %q",
					keep, i, tok.Decode(records.IDs(g.ContextIDs)), tok.Decode(records.IDs(w.ContextIDs)), g.InfoText, w.InfoText)
			}
		}
		// topk 2: the third Hamlet passage is not shown.
		if !reflect.DeepEqual(got.Steps[0].DocIDs, []string{"12", "13"}) || strings.Contains(got.Steps[0].InfoText, "Ophelia") {
			t.Fatalf("keep %s: first observation %v %q", keep, got.Steps[0].DocIDs, got.Steps[0].InfoText)
		}
	}
}

// TestMessagesFormIsTheSameTrajectory: the OpenAI-style messages of the same
// trajectory (the observation as "Doc i(Title: T) text" content, the
// questions read from the user message) give the same ids.
func TestMessagesFormIsTheSameTrajectory(t *testing.T) {
	_, tok := qwen(t)
	cfg := agent.DefaultConfig()
	cfg.TopK, cfg.MaxTurns = 3, 5
	ag, err := agent.New(cfg, tok)
	if err != nil {
		t.Fatal(err)
	}
	im := &Importer{Agent: ag, Tok: tok}
	want, err := im.Row(stepsLine(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	docs := func(ps []Passage) string {
		d := make([]agent.Doc, len(ps))
		for i, p := range ps {
			d[i] = agent.Doc{Title: p.Title, Text: p.Text, Contents: p.Contents}
		}
		return "<information>" + ag.PassagesText(d) + "</information>"
	}
	msgs := []map[string]any{
		{"role": "system", "content": "You are a helpful assistant."},
		{"role": "user", "content": "Answer with memory. Questions: who wrote hamlet?; what is the capital of france?"},
		{"role": "assistant", "content": agent.FormatStep("search", "nothing found yet", "search question 1", "hamlet author", "")},
		{"role": "tool", "content": docs(hamletPassages), "tool_call_id": "c1"},
		{"role": "assistant", "content": agent.FormatStep("search", "[1] William Shakespeare", "now question 2", "capital of france", "")},
		{"role": "user", "content": "", "passages": parisPassages},
		{"role": "assistant", "content": agent.FormatStep("search", "[1] William Shakespeare; [2] Paris", "both are known", "", "William Shakespeare; Paris")},
	}
	raw, _ := json.Marshal(map[string]any{"task_id": "demo/k2/1", "data_source": "demo",
		"golds": [][]string{{"William Shakespeare", "Shakespeare"}, {"Paris"}}, "messages": msgs})
	got, err := im.Row(raw, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.Steps {
		if !reflect.DeepEqual(got.Steps[i].ContextIDs, want.Steps[i].ContextIDs) || !reflect.DeepEqual(got.Steps[i].ObsIDs, want.Steps[i].ObsIDs) {
			t.Fatalf("step %d differs:\n%q\n%q", i, got.Steps[i].InfoText, want.Steps[i].InfoText)
		}
	}
}

func TestBadLinesNameLineAndField(t *testing.T) {
	_, tok := qwen(t)
	ag, err := agent.New(agent.DefaultConfig(), tok)
	if err != nil {
		t.Fatal(err)
	}
	im := &Importer{Agent: ag, Tok: tok}
	good := string(stepsLine(t))
	for body, want := range map[string]string{
		good + "\n" + strings.Replace(good, `,"think":"now question 2"`, "", 1):                                      `row 2: field "steps[1].think": missing`,
		strings.Replace(good, `"search":"hamlet author",`, `"answer":"x","search":"hamlet author",`, 1):              `row 1: field "steps[0]": want exactly one of "search" and "answer"`,
		strings.Replace(good, `"golds":[["William Shakespeare","Shakespeare"],["Paris"]]`, `"golds":[["Paris"]]`, 1): `row 1: field "golds": 1 gold lists for 2 questions`,
		strings.Replace(good, `"mem":"nothing found yet"`, `"mem":"a <think> inside"`, 1):                            `row 1: field "steps[0]": the step does not follow the protocol`,
		strings.Replace(good, `"search":"capital of france"`, `"query":"capital of france"`, 1):                      `row 1: not a trajectory object`,
		`{"questions":["q?"],"golds":["a"],"steps":[{"mem":"m","think":"t","search":"s"}]}`:                          `row 1: field "steps[0]": the trajectory ends with a search`,
	} {
		path := filepath.Join(t.TempDir(), "trajectories.jsonl")
		os.WriteFile(path, []byte(body+"\n"), 0o644)
		_, err := im.ReadFile(path)
		if err == nil || !strings.Contains(err.Error(), "trajectories.jsonl: "+want) {
			t.Errorf("error %v, want it to contain %q", err, want)
		}
	}
}

// TestImportThenSFT runs `mempo-rollout import` and a few `mempo-update sft`
// steps on the rows: the command writes rows SFT reads and learns from (the
// loss on the imported trajectories falls over three passes), and the rows'
// contexts are the protocol's under the command's flags.
func TestImportThenSFT(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds two commands")
	}
	tokPath, tok := qwen(t)
	root := testenv.RepoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin")
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", filepath.Base(name), args, err, out)
		}
		return string(out)
	}
	run("go", "build", "-o", bin+"/", "./cmd/mempo-rollout", "./cmd/mempo-update")
	in := filepath.Join(tmp, "trajectories.jsonl")
	second := strings.Replace(string(stepsLine(t)), `"task_id":"demo/k2/1"`, `"task_id":"demo/k2/2"`, 1)
	os.WriteFile(in, []byte(string(stepsLine(t))+"\n"+second+"\n"), 0o644)
	demos := filepath.Join(tmp, "demos.parquet")
	log := run(filepath.Join(bin, "mempo-rollout"), "import", "--tokenizer", tokPath, "--topk", "2", "--max-turns", "5", "--out", demos, in)
	if !strings.Contains(log, "2 trajectories (2 all correct)") {
		t.Fatalf("import said: %s", log)
	}
	rows, err := records.ReadFile[records.Rollout](demos)
	if err != nil || len(rows) != 2 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	cfg := agent.DefaultConfig()
	cfg.TopK, cfg.MaxTurns = 2, 5
	ag, _ := agent.New(cfg, tok)
	for i := range rows {
		if err := ag.CheckRecord(rows[i].Questions, rollout.StepRecords(&rows[i])); err != nil {
			t.Fatalf("row %d: %v", i+1, err)
		}
	}
	init := filepath.Join(tmp, "init")
	run(filepath.Join(bin, "mempo-update"), "init", "--config", "tiny", "--tokenizer", tokPath, "--out", init, "--seed", "2")
	sft, metrics := filepath.Join(tmp, "sft"), filepath.Join(tmp, "sft-metrics.jsonl")
	run(filepath.Join(bin, "mempo-update"), "sft", "--model", init, "--data", demos, "--out", sft,
		"--epochs", "3", "--batch-size", "0", "--lr", "3e-3", "--metrics", metrics, "--device", "cpu")
	ms, err := records.ReadFile[records.Update](metrics)
	if err != nil || len(ms) != 3 {
		t.Fatalf("%d metrics rows, %v", len(ms), err)
	}
	if !(ms[2].Loss < ms[0].Loss) {
		t.Fatalf("SFT loss did not fall on the imported rows: %g → %g → %g", ms[0].Loss, ms[1].Loss, ms[2].Loss)
	}
	ck, err := checkpoint.Open(sft)
	if err != nil {
		t.Fatal(err)
	}
	ck.Close()
}
