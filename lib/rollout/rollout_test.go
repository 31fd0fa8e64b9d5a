package rollout

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/qa"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/retrieval"
	"github.com/mempo/mempo/lib/rl"
	"github.com/mempo/mempo/lib/tasks"
	"github.com/mempo/mempo/lib/testenv"
	"github.com/mempo/mempo/lib/tokenizer"
)

// hotpotRows is how many HotpotQA dev rows the test index and tasks use:
// their 10 paragraphs each make a small real corpus that builds in well
// under a second.
const hotpotRows = 24

var fixture struct {
	sync.Once
	dir   string
	index string
	tasks []tasks.Task
	err   error
}

// hotpot builds (once per test binary) a BM25 index over the paragraphs of
// the first hotpotRows rows of the shared HotpotQA dev file and the k = 1
// tasks of the same rows; it skips when ../shared/data is absent.
func hotpot(t testing.TB) (string, []tasks.Task) {
	t.Helper()
	src := filepath.Join(testenv.SharedData(t), "hotpotqa", "dev-with-paragraphs-a.jsonl")
	if _, err := os.Stat(src); err != nil {
		t.Skipf("real data not present: %s (the shared HotpotQA paragraphs, expected at ../shared/data beside the repository)", src)
	}
	f := &fixture
	f.Do(func() {
		f.dir, f.err = os.MkdirTemp("", "mempo-rollout-test-")
		if f.err != nil {
			return
		}
		raw, err := os.ReadFile(src)
		if err != nil {
			f.err = err
			return
		}
		lines := bytes.SplitN(raw, []byte("\n"), hotpotRows+1)[:hotpotRows]
		slice := filepath.Join(f.dir, "hotpotqa", "dev-slice.jsonl")
		os.MkdirAll(filepath.Dir(slice), 0o755)
		if f.err = os.WriteFile(slice, append(bytes.Join(lines, []byte("\n")), '\n'), 0o644); f.err != nil {
			return
		}
		var corpus bytes.Buffer
		if _, f.err = retrieval.ConvertCorpus(retrieval.FromHotpotQA, []string{slice}, &corpus); f.err != nil {
			return
		}
		cpath := filepath.Join(f.dir, "corpus.jsonl")
		if f.err = os.WriteFile(cpath, corpus.Bytes(), 0o644); f.err != nil {
			return
		}
		f.index = filepath.Join(f.dir, "index")
		if _, f.err = retrieval.Build(context.Background(), retrieval.BuildOptions{Corpus: cpath, Out: f.index, Analyzer: retrieval.DefaultAnalyzer}); f.err != nil {
			return
		}
		qs, _, err := tasks.ReadFile(slice, "hotpotqa", "hotpotqa")
		if err != nil {
			f.err = err
			return
		}
		f.tasks, f.err = tasks.Build(qs, 1)
	})
	if f.err != nil {
		t.Fatal(f.err)
	}
	return f.index, f.tasks
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fixture.dir != "" {
		os.RemoveAll(fixture.dir)
	}
	os.Exit(code)
}

func smallTok(t testing.TB) Tok {
	t.Helper()
	tk, err := tokenizer.Load(filepath.Join(testenv.RepoRoot(t), "testdata", "tokenizer", "small-bpe.json"))
	if err != nil {
		t.Fatal(err)
	}
	return Tok{tk}
}

// plan writes the output of turn `turn` of sample `sample` for a question
// with gold answer `gold`:
//
//	0: search the question, then answer the gold      (R^T 1)
//	1: search twice, then answer "<first gold word> zzzq"  (EM 0, partial F1)
//	2: no tags at all                                  (bad_format)
//	3: answer the gold at once, with EOS after </answer> text
//	4: on the first task, search until the turns run out; on the
//	   others, answer the gold at the third turn
func plan(sample, turn int, question, gold string, firstTask bool) string {
	mem := testenv.MarkedMemory(sample, turn, fmt.Sprintf("noted %d things", turn))
	search := mem + "<think>I should look this up.</think><search>" + question + "</search>"
	answer := func(a string) string { return mem + "<think>I know it.</think><answer>" + a + "</answer>" }
	switch sample {
	case 0:
		if turn == 0 {
			return search
		}
		return answer(gold)
	case 1:
		if turn < 2 {
			return search
		}
		return answer(strings.Fields(gold)[0] + " zzzq")
	case 2:
		return "The answer must be somewhere; I will not use tags."
	case 3:
		return answer(gold)
	}
	if !firstTask && turn == 2 {
		return answer(gold)
	}
	return search
}

// scriptFor makes a Script that finds the task by its question and the
// sample and turn from the last marker in the context.
func scriptFor(ts []tasks.Task) func(string, int, uint64) string {
	return func(prompt string, sample int, _ uint64) string {
		sample, turn := testenv.MarkedTurn(prompt, sample)
		for i, tk := range ts {
			if strings.Contains(prompt, tk.Questions[0]) {
				return plan(sample, turn, tk.Questions[0], tk.Golds[0][0], i == 0)
			}
		}
		return "no task found in the prompt"
	}
}

const eosID = 0 // <|endoftext|> in small-bpe.json

// scriptedStepTokens is the step budget of the scripted policies' agents:
// more than any scripted step takes.
const scriptedStepTokens = 400

func newAgent(t testing.TB, tok agent.Tokenizer, mut func(*agent.Config)) *agent.Agent {
	t.Helper()
	cfg := agent.DefaultConfig()
	cfg.MaxStepTokens, cfg.EOSIDs = scriptedStepTokens, []int{eosID}
	if mut != nil {
		mut(&cfg)
	}
	ag, err := agent.New(cfg, tok)
	if err != nil {
		t.Fatal(err)
	}
	return ag
}

func jobsOf(ts []tasks.Task) []Job {
	jobs := make([]Job, len(ts))
	for i, tk := range ts {
		jobs[i] = Job{Group: int64(i), Task: tk}
	}
	return jobs
}

func run(t testing.TB, e *Engine, jobs []Job) ([]records.Rollout, Stats) {
	t.Helper()
	var rows []records.Rollout
	st, err := e.Run(context.Background(), jobs, func(j Job, rs []records.Rollout) error {
		if len(rs) != e.Opts.GroupSize {
			t.Errorf("task %s: %d rows, want %d", j.Task.TaskID, len(rs), e.Opts.GroupSize)
		}
		rows = append(rows, rs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		if err := rows[i].Validate(); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
	}
	return rows, st
}

// recordingSearcher counts calls and remembers the queries.
type recordingSearcher struct {
	retrieval.Searcher
	calls   int
	queries [][]string
}

func (r *recordingSearcher) Search(ctx context.Context, qs []string, k int) ([][]retrieval.Hit, error) {
	r.calls++
	r.queries = append(r.queries, append([]string(nil), qs...))
	return r.Searcher.Search(ctx, qs, k)
}

// callLog wraps a policy and logs the shape of every Generate call.
type callLog struct {
	Policy
	calls [][]model.Request
}

func (c *callLog) Generate(reqs []model.Request, o model.GenerateOptions) ([]*model.Generation, error) {
	c.calls = append(c.calls, reqs)
	return c.Policy.Generate(reqs, o)
}

func TestScriptedRolloutsOnRealIndex(t *testing.T) {
	index, all := hotpot(t)
	ts := all[:5]
	tok := smallTok(t)
	ag := newAgent(t, tok, func(c *agent.Config) { c.ObsMaxTokens = 5000 })
	local, err := retrieval.NewLocal(index)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	srch := &recordingSearcher{Searcher: local}
	const G = 5
	pol := &callLog{Policy: &Scripted{Tok: tok, Script: scriptFor(ts), EOS: eosID}}
	e := &Engine{Agent: ag, Policy: pol, Searcher: srch, Opts: Options{
		GroupSize: G, Batch: 12, Decode: tok.Decode,
		Sampling: model.SampleParams{Temperature: 1, TopP: 1}, Seed: 7, PolicyID: "scripted", MemoryReward: true,
	}}
	rows, st := run(t, e, jobsOf(ts))
	if len(rows) != len(ts)*G || st.Trajectories != len(rows) || st.TasksDone != len(ts) {
		t.Fatalf("%d rows, stats %+v", len(rows), st)
	}

	// Continuous batching: two tasks (10 trajectories) fit a batch of 12;
	// the first call holds one N = G request per task (shared prefill); a
	// third task is admitted only once one has finished, in the same call as
	// later turns of the others.
	first := pol.calls[0]
	if len(first) != 2 || first[0].N != G || first[1].N != G {
		t.Fatalf("first Generate call: %d requests %+v, want 2 with N = %d", len(first), first, G)
	}
	// Samples 2 and 3 of both tasks end at the first turn: four free slots
	// beside six running trajectories admit the third task at once, while
	// the first two are still running.
	if c := pol.calls[1]; len(c) == 0 || c[len(c)-1].N != G {
		t.Errorf("second Generate call does not admit a new task: %+v", c)
	}
	mixed := false
	for _, c := range pol.calls[1:] {
		hasFresh, hasOld := false, false
		for _, r := range c {
			hasFresh = hasFresh || r.N == G
			hasOld = hasOld || r.N == 1
		}
		mixed = mixed || hasFresh && hasOld
	}
	if !mixed {
		t.Error("no Generate call mixed a newly admitted task with later turns of running ones")
	}
	// Searches go in one call per turn: at turn 1 samples 0, 1 and 4 of
	// two tasks search their question, 2 distinct queries for 6 searches.
	if len(srch.queries[0]) != 2 {
		t.Errorf("first search call had %d queries, want 2", len(srch.queries[0]))
	}
	if st.SearchesRun >= st.Searches {
		t.Errorf("%d queries run for %d searches: not deduplicated", st.SearchesRun, st.Searches)
	}
	if srch.calls >= st.Searches {
		t.Errorf("%d search calls for %d queries: not batched", srch.calls, st.Searches)
	}

	promptText := tok.Decode(ag.PromptIDs(ts[0].Questions))
	if !strings.Contains(promptText, "<answer>") {
		t.Fatal("precondition: the task prompt shows the <answer> tag")
	}
	asstOpen := tok.Encode("<|im_start|>assistant\n")
	for _, r := range rows {
		tk := ts[r.Group]
		if r.TaskID != tk.TaskID || r.Policy != "scripted" || r.Keep != "1" || r.Temperature != 1 {
			t.Fatalf("row metadata %s/%d: %+v", r.TaskID, r.Group, r)
		}
		if r.Seed != int64(SampleSeed(7, r.Group, int(r.Sample))) {
			t.Errorf("seed %d", r.Seed)
		}
		// Every stored context is exactly what the protocol gives.
		if err := ag.CheckRecord(tk.Questions, StepRecords(&r)); err != nil {
			t.Fatalf("task %d sample %d: %v", r.Group, r.Sample, err)
		}
		// By hand, keep 1: step t sees the prompt, then step t−1 as an
		// assistant turn and its observation as a user turn, then the
		// generation prompt — nothing older.
		prompt := records.IDs(r.Steps[0].ContextIDs)
		prompt = prompt[:len(prompt)-len(asstOpen)]
		for i := 1; i < len(r.Steps); i++ {
			prev := r.Steps[i-1]
			var want []int
			for _, part := range [][]int{prompt, asstOpen, records.IDs(prev.OutputIDs), tok.Encode("<|im_end|>\n"),
				tok.Encode("<|im_start|>user\n"), records.IDs(prev.ObsIDs), tok.Encode("<|im_end|>\n"), asstOpen} {
				want = append(want, part...)
			}
			if !reflect.DeepEqual(records.IDs(r.Steps[i].ContextIDs), want) {
				t.Fatalf("task %d sample %d step %d: context is not prompt ⊕ previous step ⊕ its observation", r.Group, r.Sample, i)
			}
		}
		// Step 0 sees the prompt and the generation prompt only.
		want0 := len(ag.PromptIDs(tk.Questions)) + len(asstOpen)
		if int(r.Steps[0].ContextTokens) != want0 {
			t.Errorf("step 0 context %d tokens, want %d", r.Steps[0].ContextTokens, want0)
		}
		// Token totals by hand.
		var total, peak int64
		for _, s := range r.Steps {
			n := int64(len(s.ContextIDs) + len(s.OutputIDs))
			total += n
			peak = max(peak, n)
			if len(s.Logprobs) != len(s.OutputIDs) || len(s.SampleLogprobs) != len(s.OutputIDs) {
				t.Fatalf("log-probs %d/%d for %d ids", len(s.Logprobs), len(s.SampleLogprobs), len(s.OutputIDs))
			}
		}
		if r.TotalTokens != total || r.PeakTokens != peak || int(r.Turns) != len(r.Steps) {
			t.Errorf("tokens total %d peak %d turns %d, want %d %d %d", r.TotalTokens, r.PeakTokens, r.Turns, total, peak, len(r.Steps))
		}
		gold := tk.Golds[0][0]
		switch r.Sample {
		case 0:
			if len(r.Steps) != 2 || r.Answer != gold || !r.FormatOK || r.RewardTask != 1 || r.EM[0] != 1 || r.F1[0] != 1 {
				t.Errorf("sample 0: %d steps answer %q format %v R^T %v EM %v F1 %v", len(r.Steps), r.Answer, r.FormatOK, r.RewardTask, r.EM, r.F1)
			}
			// The observation: top-3 BM25 passages of the query, as
			// "Doc i(Title: …) text" lines in <information> with the hint.
			hits, err := local.Search(context.Background(), []string{tk.Questions[0]}, 3)
			if err != nil {
				t.Fatal(err)
			}
			s0 := r.Steps[0]
			if s0.Action != "search" || s0.Query != tk.Questions[0] || len(s0.DocIDs) != 3 {
				t.Fatalf("step 0: %+v", s0)
			}
			for i, h := range hits[0] {
				if s0.DocIDs[i] != h.ID {
					t.Errorf("doc %d: %s, want %s", i, s0.DocIDs[i], h.ID)
				}
			}
			title, _, _ := strings.Cut(hits[0][0].Contents, "\n")
			title = strings.Trim(title, "\"")
			if !strings.HasPrefix(s0.InfoText, "<information>[Turns left: 15]\nDoc 1(Title: "+title+") ") ||
				!strings.HasSuffix(s0.InfoText, "</information>") || !strings.Contains(s0.InfoText, "\nDoc 3(Title: ") {
				t.Errorf("observation text: %q", s0.InfoText)
			}
			if ctx1 := tok.Decode(records.IDs(r.Steps[1].ContextIDs)); !strings.Contains(ctx1, s0.InfoText) {
				t.Error("step 1's context does not hold step 0's observation")
			}
		case 1:
			// "<first gold word> zzzq" against the gold: one shared token.
			g := strings.Fields(qa.Normalize(gold))
			p := strings.Fields(qa.Normalize(r.Answer))
			common := 0
			if len(g) > 0 && len(p) > 0 && g[0] == p[0] {
				common = 1
			}
			f1 := 0.0
			if common > 0 {
				prec, rec := float64(common)/float64(len(p)), float64(common)/float64(len(g))
				f1 = 2 * prec * rec / (prec + rec)
			}
			if len(r.Steps) != 3 || r.EM[0] != 0 || r.RewardTask != 0 || math.Abs(r.F1[0]-f1) > 1e-12 || !r.FormatOK {
				t.Errorf("sample 1: %d steps answer %q EM %v F1 %v (want %v) R^T %v", len(r.Steps), r.Answer, r.EM, r.F1, f1, r.RewardTask)
			}
		case 2:
			// No tags: the answer is never taken from the prompt, which
			// shows <answer>.
			if r.Answer != "" || r.FormatOK || r.Failure != "bad_format" || r.RewardTask != 0 || r.Steps[0].Action != "invalid" ||
				r.Steps[0].RMem != nil || r.EM[0] != 0 {
				t.Errorf("sample 2: %+v", r)
			}
		case 3:
			if len(r.Steps) != 1 || r.RewardTask != 1 || r.Steps[0].Finish != "stop" {
				t.Errorf("sample 3: %d steps R^T %v finish %q", len(r.Steps), r.RewardTask, r.Steps[0].Finish)
			}
		case 4:
			if r.Group != 0 {
				if len(r.Steps) != 3 || r.RewardTask != 1 {
					t.Errorf("sample 4 of task %d: %d steps R^T %v", r.Group, len(r.Steps), r.RewardTask)
				}
				break
			}
			if len(r.Steps) != 16 || r.Failure != "no_answer" || r.Answer != "" || r.RewardTask != 0 || r.FormatOK {
				t.Errorf("sample 4: %d steps failure %q", len(r.Steps), r.Failure)
			}
			if !strings.Contains(r.Steps[14].InfoText, "[Turns left: 1. This is your last step") || r.Steps[15].InfoText != "" {
				t.Errorf("last observations: %q / %q", r.Steps[14].InfoText, r.Steps[15].InfoText)
			}
		}
		// Memory reward with FakeLogProbs by hand, for every step that has
		// a <mem> block.
		for i, s := range r.Steps {
			if s.MemStart < 0 {
				continue
			}
			out := records.IDs(s.OutputIDs)
			lead, g := tok.Encode(agent.DefaultScoreLeadIn), tok.Encode(gold)
			mem := append(append(append(records.IDs(r.Steps[0].ContextIDs), out[s.MemStart:s.MemEnd]...), lead...), g...)
			// keep 1: step 0 and 1 contexts are the whole raw history.
			if i > 1 {
				continue
			}
			hist := append(append(records.IDs(s.ContextIDs), lead...), g...)
			pm, err1 := rl.GeoMeanProb(FakeLogProbs([][]int{mem})[0][len(mem)-len(g):])
			ph, err2 := rl.GeoMeanProb(FakeLogProbs([][]int{hist})[0][len(hist)-len(g):])
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if s.PGoldMem == nil || math.Abs(*s.PGoldMem-pm) > 1e-12 || math.Abs(*s.PGoldHist-ph) > 1e-12 || math.Abs(*s.RMem-(pm-ph)) > 1e-12 {
				t.Errorf("task %d sample %d step %d: memory terms %v %v, want %v %v", r.Group, r.Sample, i, s.PGoldMem, s.PGoldHist, pm, ph)
			}
		}
	}
	if st.MemSeqsUniq >= st.MemSeqs {
		t.Errorf("memory-reward sequences: %d run of %d built; the shared step-0 prior should be run once", st.MemSeqsUniq, st.MemSeqs)
	}
}

func TestKeepAllAndObservationCut(t *testing.T) {
	index, all := hotpot(t)
	ts := all[5:7]
	tok := smallTok(t)
	const obsLimit = 80
	ag := newAgent(t, tok, func(c *agent.Config) { c.Keep = agent.KeepAll; c.ObsMaxTokens = obsLimit; c.MaxTurns = 4 })
	local, err := retrieval.NewLocal(index)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	e := &Engine{Agent: ag, Policy: &Scripted{Tok: tok, Script: scriptFor(ts), EOS: eosID}, Searcher: local, Opts: Options{
		GroupSize: 2, Batch: 4, Decode: tok.Decode,
	}}
	rows, _ := run(t, e, jobsOf(ts))
	for _, r := range rows {
		if err := ag.CheckRecord(ts[r.Group].Questions, StepRecords(&r)); err != nil {
			t.Fatal(err)
		}
		if r.Sample != 1 {
			continue
		}
		// Full history: step 2 holds the ids of steps 0 and 1 and their
		// observations.
		ctx := records.IDs(r.Steps[2].ContextIDs)
		for j := 0; j < 2; j++ {
			if !containsSeq(ctx, records.IDs(r.Steps[j].OutputIDs)) || !containsSeq(ctx, records.IDs(r.Steps[j].ObsIDs)) {
				t.Errorf("step 2's context lacks step %d", j)
			}
			if len(r.Steps[j].ObsIDs) != obsLimit {
				t.Errorf("observation %d: %d ids, want the cut at %d", j, len(r.Steps[j].ObsIDs), obsLimit)
			}
			if !strings.HasSuffix(r.Steps[j].InfoText, "</information>") {
				t.Errorf("cut observation lost its closing tag: %q", r.Steps[j].InfoText)
			}
		}
	}
}

func containsSeq(hay, needle []int) bool {
	if len(needle) == 0 {
		return true
	}
outer:
	for i := 0; i+len(needle) <= len(hay); i++ {
		for j := range needle {
			if hay[i+j] != needle[j] {
				continue outer
			}
		}
		return true
	}
	return false
}

// shortPrompt keeps the sequences the random-weight model runs over short
// (the small BPE vocabulary spends about one id per byte).
const shortPrompt = "Answer: {questions} Use <mem>, <think>, <{tool}> and <answer>."

// tinyModel is a random-weight Qwen2 of the tiny preset's shape over the
// small BPE vocabulary.
func tinyModel(t testing.TB, tok Tok) *model.Model {
	t.Helper()
	cfg, err := checkpoint.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.VocabSize = tok.T.VocabSize()
	cfg.EOSTokenIDs = []int{eosID}
	bos := eosID
	cfg.BOSTokenID, cfg.Generation = &bos, nil
	m, err := model.New(cfg, checkpoint.RandomInit(cfg, 3), nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The memory reward against log-probs that lib/model computes for each
// sequence alone: scripted steps, a real random-weight model scoring them.
func TestMemoryRewardAgainstModel(t *testing.T) {
	index, all := hotpot(t)
	ts := all[7:8]
	tok := smallTok(t)
	m := tinyModel(t, tok)
	// Short observations keep the teacher-forced passes small.
	ag := newAgent(t, tok, func(c *agent.Config) { c.Keep = agent.KeepAll; c.ObsMaxTokens = 60; c.TaskPrompt = shortPrompt })
	local, err := retrieval.NewLocal(index)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	// The engine scores through LogProbsFrom (the gold only) or
	// LogProbsShared (shared beginnings run once), the check below through
	// the model's full LogProbs of each sequence alone.
	scripted := &Scripted{Tok: tok, Script: scriptFor(ts), EOS: eosID, LP: m.LogProbs}
	for _, pol := range []Policy{scriptedFrom{scripted, m.LogProbsFrom}, scriptedShared{scripted, m.LogProbsShared}} {
		checkMemoryRewards(t, m, tok, ag, local, ts, pol)
	}
}

func checkMemoryRewards(t *testing.T, m *model.Model, tok Tok, ag *agent.Agent, local retrieval.Searcher, ts []tasks.Task, pol Policy) {
	e := &Engine{Agent: ag, Policy: pol, Searcher: local, Opts: Options{
		GroupSize: 2, Batch: 4, Decode: tok.Decode, MemoryReward: true,
		MemTokensPerCall: 1200, // several calls
	}}
	rows, _ := run(t, e, jobsOf(ts))
	lead := tok.Encode(agent.DefaultScoreLeadIn)
	checked := 0
	for _, r := range rows {
		g := tok.Encode(ts[r.Group].Golds[0][0])
		for i, s := range r.Steps {
			if s.MemStart < 0 {
				if s.RMem != nil {
					t.Error("r_mem on a step without <mem>")
				}
				continue
			}
			out := records.IDs(s.OutputIDs)
			mem := append(append(append(records.IDs(r.Steps[0].ContextIDs), out[s.MemStart:s.MemEnd]...), lead...), g...)
			hist := append(append(records.IDs(s.ContextIDs), lead...), g...) // keep all: the context is the raw history
			prob := func(seq []int) float64 {
				lp, err := m.LogProbs([][]int{seq})
				if err != nil {
					t.Fatal(err)
				}
				sum := 0.0
				for _, x := range lp[0][len(seq)-len(g):] {
					sum += float64(x)
				}
				return math.Exp(sum / float64(len(g)))
			}
			pm, ph := prob(mem), prob(hist)
			if s.PGoldMem == nil || math.Abs(*s.PGoldMem-pm) > 1e-5 || math.Abs(*s.PGoldHist-ph) > 1e-5 || math.Abs(*s.RMem-(pm-ph)) > 2e-5 {
				t.Errorf("task %d sample %d step %d: p_mem %v p_hist %v, by hand %v %v", r.Group, r.Sample, i, s.PGoldMem, s.PGoldHist, pm, ph)
			}
			checked++
		}
	}
	if checked < 4 {
		t.Fatalf("only %d memory blocks checked", checked)
	}
}

// A random-weight model sampling for real: the rows are well formed, and a
// trajectory samples the same whichever other trajectories share its batch.
// tinyTwoTurnSetup is two HotpotQA tasks from `from`, a random-weight model,
// a two-turn agent that corrects invalid steps, and a local searcher (closed
// with the test).
func tinyTwoTurnSetup(t *testing.T, from int) ([]tasks.Task, Tok, *model.Model, *agent.Agent, retrieval.Searcher) {
	index, all := hotpot(t)
	tok := smallTok(t)
	m := tinyModel(t, tok)
	ag := newAgent(t, tok, func(c *agent.Config) {
		c.MaxTurns = 2
		c.MaxStepTokens = 6
		c.OnInvalid = agent.CorrectOnInvalid
		c.TaskPrompt = shortPrompt
	})
	local, err := retrieval.NewLocal(index)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	return all[from : from+2], tok, m, ag, local
}

func TestTinyModelSamplingIsBatchIndependent(t *testing.T) {
	ts, tok, m, ag, local := tinyTwoTurnSetup(t, 9)
	opts := Options{GroupSize: 2, Decode: tok.Decode, Seed: 11,
		Sampling: model.SampleParams{Temperature: 1, TopP: 0.95}, MemoryReward: true}
	var results [][]records.Rollout
	// Batch 2 (one task at a time), batch 4 in one Generate call per turn,
	// batch 4 with the turn split into calls of at most ~1 row, and batch 4
	// with every prompt prefilled whole.
	for _, c := range []struct {
		batch, genTokens int
		wholePrefill     bool
	}{{2, 0, false}, {4, 0, false}, {4, 1, false}, {4, 0, true}} {
		o := opts
		o.Batch, o.GenTokensPerCall, o.NoSharedPrefill = c.batch, c.genTokens, c.wholePrefill
		pol := &callLog{Policy: m}
		rows, st := run(t, &Engine{Agent: ag, Policy: pol, Searcher: local, Opts: o}, jobsOf(ts))
		// The second turn's prompts begin with their task's prompt: with
		// the turn in one call, each task's is run once.
		if shared := st.PromptIDsRun < st.PromptIDs; shared != (c.genTokens == 0 && !c.wholePrefill) || st.PromptIDs == 0 {
			t.Errorf("batch %d, %d tokens a call, whole prefill %v: the prefill ran %d of %d prompt ids", c.batch, c.genTokens, c.wholePrefill, st.PromptIDsRun, st.PromptIDs)
		}
		if c.genTokens > 0 {
			for _, call := range pol.calls {
				if len(call) != 1 {
					t.Fatalf("split turn: a call with %d requests", len(call))
				}
			}
		}
		sortRows(rows)
		for _, r := range rows {
			if err := ag.CheckRecord(ts[r.Group].Questions, StepRecords(&r)); err != nil {
				t.Fatal(err)
			}
			if len(r.Steps) != 2 || r.Failure != "no_answer" && r.Failure != "bad_format" {
				t.Errorf("random weights: %d steps, failure %q (want 2 corrected steps)", len(r.Steps), r.Failure)
			}
			for _, s := range r.Steps {
				if s.Finish != "length" && s.Finish != "stop" || len(s.OutputIDs) > 6 {
					t.Errorf("step finish %q with %d ids", s.Finish, len(s.OutputIDs))
				}
			}
		}
		results = append(results, rows)
	}
	for k := 1; k < len(results); k++ {
		for i := range results[0] {
			a, b := results[0][i], results[k][i]
			for j := range a.Steps {
				if !reflect.DeepEqual(a.Steps[j].OutputIDs, b.Steps[j].OutputIDs) || !reflect.DeepEqual(a.Steps[j].ContextIDs, b.Steps[j].ContextIDs) {
					t.Fatalf("run %d: task %d sample %d step %d differs from batch 2", k, a.Group, a.Sample, j)
				}
			}
		}
	}
	path := filepath.Join(t.TempDir(), "r.parquet")
	if err := records.WriteFile(path, results[0]); err != nil {
		t.Fatal(err)
	}
	back, err := records.ReadFile[records.Rollout](path)
	if err != nil || len(back) != len(results[0]) {
		t.Fatalf("read back %d rows: %v", len(back), err)
	}
}

func sortRows(rows []records.Rollout) {
	for i := 1; i < len(rows); i++ {
		for j := i; j > 0 && (rows[j].Group < rows[j-1].Group || rows[j].Group == rows[j-1].Group && rows[j].Sample < rows[j-1].Sample); j-- {
			rows[j], rows[j-1] = rows[j-1], rows[j]
		}
	}
}

// Two objectives per task: R^T needs both answers right and exactly two of
// them; EM and F1 are per objective.
func TestMultiObjectiveRewards(t *testing.T) {
	index, _ := hotpot(t)
	src := filepath.Join(fixture.dir, "hotpotqa", "dev-slice.jsonl")
	qs, _, err := tasks.ReadFile(src, "hotpotqa", "hotpotqa")
	if err != nil {
		t.Fatal(err)
	}
	ts, err := tasks.Build(qs[:4], 2)
	if err != nil || len(ts) != 2 {
		t.Fatalf("%d tasks: %v", len(ts), err)
	}
	tok := smallTok(t)
	ag := newAgent(t, tok, nil)
	local, err := retrieval.NewLocal(index)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	script := func(prompt string, sample int, _ uint64) string {
		for _, tk := range ts {
			if !strings.Contains(prompt, tk.Questions[1]) {
				continue
			}
			g1, g2 := tk.Golds[0][0], tk.Golds[1][0]
			ans := [...]string{g1 + "; " + g2, g1, g1 + "; certainly not it"}[sample]
			return "<mem>S0T0 both</mem><think>ok</think><answer>" + ans + "</answer>"
		}
		return "lost"
	}
	e := &Engine{Agent: ag, Policy: &Scripted{Tok: tok, Script: script, EOS: eosID}, Searcher: local, Opts: Options{
		GroupSize: 3, Decode: tok.Decode}}
	rows, _ := run(t, e, jobsOf(ts))
	want := []struct {
		em     []float64
		rt     float64
		format bool
	}{{[]float64{1, 1}, 1, true}, {[]float64{0, 0}, 0, false}, {[]float64{1, 0}, 0, true}}
	for _, r := range rows {
		w := want[r.Sample]
		if r.K != 2 || !reflect.DeepEqual(r.EM, w.em) || r.RewardTask != w.rt || r.FormatOK != w.format || len(r.F1) != 2 {
			t.Errorf("task %d sample %d: answer %q EM %v F1 %v R^T %v format %v; want EM %v R^T %v format %v",
				r.Group, r.Sample, r.Answer, r.EM, r.F1, r.RewardTask, r.FormatOK, w.em, w.rt, w.format)
		}
		if r.Sample == 2 && r.F1[0] != 1 {
			t.Errorf("F1 of the right objective: %v", r.F1)
		}
	}
	// Partial credit: the mean EM or F1 over objectives, 0 without a valid
	// format (sample 1 gave one answer for two questions).
	for _, kind := range []string{"em", "f1"} {
		e.Opts.TaskReward = kind
		rows, _ := run(t, e, jobsOf(ts))
		for _, r := range rows {
			want := [...]float64{1, 0, 0.5}[r.Sample]
			if kind == "f1" && r.Sample == 2 {
				want = (1 + r.F1[1]) / 2
			}
			if math.Abs(r.RewardTask-want) > 1e-12 {
				t.Errorf("--task-reward %s, sample %d: R^T %v, want %v (EM %v F1 %v)", kind, r.Sample, r.RewardTask, want, r.EM, r.F1)
			}
		}
	}
}

// failingSearcher fails from its n-th call on.
type failingSearcher struct {
	retrieval.Searcher
	n, calls int
}

func (f *failingSearcher) Search(ctx context.Context, qs []string, k int) ([][]retrieval.Hit, error) {
	f.calls++
	if f.calls >= f.n {
		return nil, fmt.Errorf("connection refused")
	}
	return f.Searcher.Search(ctx, qs, k)
}

// A retrieval failure stops the run with an error that says so; the tasks
// emitted before it are whole.
func TestRetrievalErrorStopsRun(t *testing.T) {
	index, all := hotpot(t)
	ts := all[1:7]
	tok := smallTok(t)
	ag := newAgent(t, tok, nil)
	local, err := retrieval.NewLocal(index)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	e := &Engine{Agent: ag, Policy: &Scripted{Tok: tok, Script: scriptFor(ts), EOS: eosID}, Searcher: &failingSearcher{Searcher: local, n: 5},
		Opts: Options{GroupSize: 4, Batch: 4, Decode: tok.Decode}}
	emitted := 0
	_, err = e.Run(context.Background(), jobsOf(ts), func(j Job, rs []records.Rollout) error {
		if len(rs) != 4 {
			t.Errorf("task emitted with %d rows", len(rs))
		}
		emitted++
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "retrieval") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error %v", err)
	}
	if emitted == 0 || emitted >= len(ts) {
		t.Errorf("%d tasks emitted before the failure", emitted)
	}
}

// A step whose context plus the step budget would pass the model's context
// is not generated: the trajectory ends with context_overflow.
func TestContextOverflow(t *testing.T) {
	index, all := hotpot(t)
	ts := all[1:2]
	tok := smallTok(t)
	ag := newAgent(t, tok, nil)
	local, err := retrieval.NewLocal(index)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	ctx0 := len(ag.PromptIDs(ts[0].Questions)) + len(ag.GenPrompt())
	budget := ag.Config().MaxStepTokens
	for _, c := range []struct {
		maxContext int
		steps      []int // per sample
	}{
		{ctx0 + budget, []int{1, 1, 1, 1}},     // step 0 fits exactly; every later context is longer
		{ctx0 + budget - 1, []int{0, 0, 0, 0}}, // not even the first step
	} {
		e := &Engine{Agent: ag, Policy: &Scripted{Tok: tok, Script: scriptFor(ts), EOS: eosID}, Searcher: local, Opts: Options{
			GroupSize: 4, MaxContext: c.maxContext, Decode: tok.Decode}}
		rows, _ := run(t, e, jobsOf(ts))
		for _, r := range rows {
			if len(r.Steps) != c.steps[r.Sample] {
				t.Errorf("max context %d sample %d: %d steps, want %d", c.maxContext, r.Sample, len(r.Steps), c.steps[r.Sample])
			}
			// Samples 2 (no tags) and 3 (answers at once) end at step 0 by
			// the protocol; the others overflow before their second step.
			want := "context_overflow"
			if len(r.Steps) == 1 && r.Sample == 2 {
				want = "bad_format"
			}
			if len(r.Steps) == 1 && r.Sample == 3 {
				want = ""
			}
			if r.Failure != want || (want != "" && r.RewardTask != 0) {
				t.Errorf("max context %d sample %d: failure %q R^T %v, want %q", c.maxContext, r.Sample, r.Failure, r.RewardTask, want)
			}
		}
	}
}

// scriptedFrom is a Scripted policy that also scores suffixes
// (suffixLogProbs), as *model.Model does.
type scriptedFrom struct {
	*Scripted
	from func(seqs [][]int, from []int) ([][]float32, error)
}

func (s scriptedFrom) LogProbsFrom(seqs [][]int, from []int) ([][]float32, error) {
	return s.from(seqs, from)
}

// scriptedShared is a Scripted policy that runs shared beginnings once
// (sharedLogProbs), as *model.Model does.
type scriptedShared struct {
	*Scripted
	shared func(seqs [][]int, from []int, budget int) ([][]float32, int, error)
}

func (s scriptedShared) LogProbsShared(seqs [][]int, from []int, budget int) ([][]float32, int, error) {
	return s.shared(seqs, from, budget)
}
