package world

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/retrieval"
	"github.com/mempo/mempo/lib/rollout"
	"github.com/mempo/mempo/lib/tasks"
	"github.com/mempo/mempo/lib/tokenizer"
)

func TestGenerateIsSeeded(t *testing.T) {
	a, err := Generate(DefaultConfig(7))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate(DefaultConfig(7))
	c, _ := Generate(DefaultConfig(8))
	if len(a.Corpus) != len(b.Corpus) {
		t.Fatalf("same seed, %d vs %d passages", len(a.Corpus), len(b.Corpus))
	}
	for i := range a.Corpus {
		if a.Corpus[i] != b.Corpus[i] {
			t.Fatalf("same seed, passage %d differs: %q vs %q", i, a.Corpus[i].Contents, b.Corpus[i].Contents)
		}
	}
	same := 0
	for i := range a.Corpus {
		if i < len(c.Corpus) && a.Corpus[i] == c.Corpus[i] {
			same++
		}
	}
	if same == len(a.Corpus) {
		t.Fatal("seeds 7 and 8 gave the same corpus")
	}
	ta, _, _ := a.Tasks(Train, 2, 5, 1)
	tb, _, _ := b.Tasks(Train, 2, 5, 1)
	tc, _, _ := a.Tasks(Train, 2, 5, 2)
	if ta[3].Prompt != tb[3].Prompt {
		t.Fatalf("same seed and stream, different tasks: %q vs %q", ta[3].Prompt, tb[3].Prompt)
	}
	if ta[3].Prompt == tc[3].Prompt && ta[4].Prompt == tc[4].Prompt {
		t.Fatal("streams 1 and 2 drew the same tasks")
	}
}

// Memory must be necessary: no answer may be readable from a prompt, test
// people never appear in training tasks, and every task fits the turn limit.
func TestTasksNeedSearch(t *testing.T) {
	w, err := Generate(DefaultConfig(3))
	if err != nil {
		t.Fatal(err)
	}
	trainPeople := map[string]bool{}
	for _, split := range []Split{Train, Test} {
		for _, k := range []int{1, 2, 4, 8, 15} {
			ts, qs, err := w.Tasks(split, k, 40, 1)
			if err != nil {
				t.Fatal(err)
			}
			twoHop := 0
			for i, task := range ts {
				if err := task.Check(); err != nil {
					t.Fatalf("%s: %v", task.TaskID, err)
				}
				if len(task.Questions) != k || len(task.Golds) != k {
					t.Fatalf("%s: %d questions, %d golds for k=%d", task.TaskID, len(task.Questions), len(task.Golds), k)
				}
				lookups := 0
				for j, q := range qs[i] {
					lookups += len(q.Lookups)
					if len(q.Lookups) == 2 {
						twoHop++
					}
					gold := task.Golds[j][0]
					for _, word := range strings.Fields(strings.ReplaceAll(task.Prompt, "?", "")) {
						if word == gold {
							t.Fatalf("%s: gold %q is in the prompt %q", task.TaskID, gold, task.Prompt)
						}
					}
					p := q.Lookups[0].Entity
					if split == Train {
						trainPeople[p] = true
					} else if trainPeople[p] || !w.Test[p] {
						t.Fatalf("%s: test task asks about %s, who is not held out", task.TaskID, p)
					}
					// The chain of lookups ends at the gold answer.
					if last := q.Lookups[len(q.Lookups)-1]; last.Value != gold || w.Facts[last.Entity][last.Attr] != gold {
						t.Fatalf("%s: lookups %v do not end at gold %q", task.TaskID, q.Lookups, gold)
					}
				}
				if lookups > w.Cfg.MaxTurns-1 {
					t.Fatalf("%s: %d lookups do not fit %d turns", task.TaskID, lookups, w.Cfg.MaxTurns)
				}
			}
			if k <= 8 && twoHop == 0 {
				t.Fatalf("%s k=%d: no two-hop question in 40 tasks", split, k)
			}
		}
	}
}

func TestPlanReadsQuestions(t *testing.T) {
	w, _ := Generate(DefaultConfig(1))
	p := w.People[0]
	plan, err := Plan([]string{w.Single(p, "city").Text, w.TwoHop(p, "product").Text})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 2 || len(plan[0]) != 1 || len(plan[1]) != 2 || plan[0][0] != (Fact{Entity: p, Attr: "city"}) ||
		plan[1][0] != (Fact{Entity: p, Attr: "employer"}) || plan[1][1].Attr != "product" {
		t.Fatalf("plan %+v", plan)
	}
	if _, err := Plan([]string{"Who wrote Hamlet?"}); err == nil {
		t.Fatal("a question from outside the world was planned")
	}
	if v, ok := ReadFact("Doc 1(Title: X) The city of Velmar is Oskaro.\nDoc 2…", "city", "Velmar"); !ok || v != "Oskaro" {
		t.Fatalf("ReadFact = %q, %v", v, ok)
	}
	if _, ok := ReadFact("Velmar once travelled from the city of Oskaro to a fair.", "city", "Velmar"); ok {
		t.Fatal("ReadFact took a distractor for the fact")
	}
}

// writeWorld writes a small world and its index into a temporary directory.
func writeWorld(t *testing.T, seed uint64) (dir, index string, tok *tokenizer.Tokenizer) {
	t.Helper()
	dir = t.TempDir()
	s := DefaultSizes()
	s.SFTTasks, s.RLTasks, s.TestTasks = 24, 8, 8
	if _, err := Write(dir, DefaultConfig(seed), s); err != nil {
		t.Fatal(err)
	}
	index = filepath.Join(dir, "index")
	if _, err := retrieval.Build(context.Background(), retrieval.BuildOptions{Corpus: filepath.Join(dir, CorpusFile), Out: index,
		Analyzer: retrieval.DefaultAnalyzer}); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(filepath.Join(dir, TokenizerFile))
	if err != nil {
		t.Fatal(err)
	}
	return dir, index, tok
}

func TestTokenizer(t *testing.T) {
	dir, _, tok := writeWorld(t, 5)
	for _, s := range append(append(append([]string(nil), SpecialTokens...), ProtocolTokens...), MarkerTokens()...) {
		if ids := tok.Encode(s); len(ids) != 1 {
			t.Fatalf("%s is %v, want one id", s, ids)
		}
	}
	// The fixed instructions are whole ids, so a k = 2 prompt is short.
	for _, ph := range InstructionPhrases() {
		if ids := tok.Encode(ph); len(ids) != 1 {
			t.Fatalf("instruction phrase %.40q… is %d ids, want 1", ph, len(ids))
		}
	}
	ag, err := agent.New(agent.DefaultConfig(), rollout.Tok{T: tok})
	if err != nil {
		t.Fatal(err)
	}
	prompt := ag.PromptIDs([]string{Numbered(1, "Velmar city?"), Numbered(2, "Tarno employer product?")})
	if len(prompt) > 40 {
		t.Fatalf("k = 2 prompt is %d ids", len(prompt))
	}
	if back, _ := tok.Decode(prompt); !strings.Contains(back, "Memory rule: before your next step") {
		t.Fatalf("prompt does not decode to the instructions: %q", back)
	}
	w, _ := Generate(DefaultConfig(5))
	words, tokens := 0, 0
	for _, text := range w.Texts() {
		ids := tok.Encode(text)
		back, err := tok.Decode(ids)
		if err != nil || back != text {
			t.Fatalf("round trip of %q gave %q (%v)", text, back, err)
		}
		words += len(strings.Fields(text))
		tokens += len(ids)
	}
	// The point of a world tokenizer: about one id per word.
	if r := float64(tokens) / float64(words); r > 2 {
		t.Fatalf("%.2f ids per word", r)
	}
	// Answer values are one id with and without a leading space (the first
	// answer follows "<answer>" without one).
	for _, xs := range [][]string{w.Companies, w.Cities, w.Products} {
		for _, x := range xs {
			if a, b := tok.Encode(x), tok.Encode(" "+x); len(a) != 1 || len(b) != 1 {
				t.Fatalf("value %q is %v / %v, want one id each", x, a, b)
			}
		}
	}
	// A person's name is its syllables, never one id, and every id of a
	// held-out person's name is also an id of some training person's name:
	// copying a name the training tasks never mention uses trained ids.
	trainIDs := map[int]bool{}
	for _, p := range w.People {
		if !w.Test[p] {
			for _, id := range tok.Encode(" " + p) {
				trainIDs[id] = true
			}
		}
	}
	for _, p := range w.People {
		ids := tok.Encode(" " + p)
		if len(ids) != 2 {
			t.Fatalf("name %q is %d ids, want its 2 syllables", p, len(ids))
		}
		for _, id := range ids {
			if !trainIDs[id] {
				t.Fatalf("held-out name %q has id %d that no training name has", p, id)
			}
		}
	}
	// Text the world never wrote still round-trips (byte-level BPE).
	for _, s := range []string{"Größe 東京 🙂", "\t\n  x", "<mem>α</mem>"} {
		if back, _ := tok.Decode(tok.Encode(s)); back != s {
			t.Fatalf("round trip of %q gave %q", s, back)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, ModelConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := checkpoint.ParseConfig(ModelConfigFile, data)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	if cfg.VocabSize < tok.VocabSize() || cfg.VocabSize%64 != 0 {
		t.Fatalf("vocab_size %d for %d tokenizer ids", cfg.VocabSize, tok.VocabSize())
	}
	imEnd, _ := tok.TokenID("<|im_end|>")
	if len(cfg.EOSTokenIDs) == 0 || cfg.EOSTokenIDs[0] != imEnd {
		t.Fatalf("eos ids %v, want <|im_end|> = %d first", cfg.EOSTokenIDs, imEnd)
	}
}

// expertWorld writes a world of seed seed (writeWorld) and opens a searcher
// over its index, closed when the test ends.
func expertWorld(t *testing.T, seed uint64) (dir string, tok rollout.Tok, srch *retrieval.Local) {
	t.Helper()
	dir, index, tk := writeWorld(t, seed)
	srch, err := retrieval.NewLocal(index)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srch.Close() })
	return dir, rollout.Tok{T: tk}, srch
}

// The expert's trajectories follow the protocol exactly, answer right, carry
// every answer in <mem>, and under keep 1 the final context holds the early
// answers only through the memory.
func TestExpert(t *testing.T) {
	dir, tok, srch := expertWorld(t, 2)
	for _, keep := range []agent.Keep{1, agent.KeepAll} {
		cfg := agent.DefaultConfig()
		cfg.Keep = keep
		ag, err := agent.New(cfg, tok)
		if err != nil {
			t.Fatal(err)
		}
		ex := &Expert{Agent: ag, Tok: tok, Searcher: srch}
		for _, k := range []int{1, 2, 4, 8} {
			ts, err := tasks.ReadTasks(filepath.Join(dir, TestTasksFile(k)))
			if err != nil {
				t.Fatal(err)
			}
			for i, task := range ts {
				r, err := ex.Run(context.Background(), task, int64(i))
				if err != nil {
					t.Fatalf("keep %d, %s: %v", keep, task.TaskID, err)
				}
				if err := ag.CheckRecord(r.Questions, rollout.StepRecords(&r)); err != nil {
					t.Fatalf("keep %d, %s: %v", keep, task.TaskID, err)
				}
				if r.RewardTask != 1 || !r.FormatOK || r.Failure != "" {
					t.Fatalf("keep %d, %s: reward %g, format %v, failure %q, answer %q, golds %v", keep, task.TaskID, r.RewardTask, r.FormatOK, r.Failure, r.Answer, r.Golds)
				}
				if int(r.Turns) < k+1 {
					t.Fatalf("%s: %d turns for %d objectives", task.TaskID, r.Turns, k)
				}
				checkCopies(t, tok.T, task.TaskID, r)
				last := r.Steps[len(r.Steps)-1]
				memText := tok.Decode(records.IDs(last.OutputIDs[last.MemStart:last.MemEnd]))
				for j, g := range r.Golds {
					if !strings.Contains(memText, g[0]) {
						t.Fatalf("%s: final memory %q lacks answer %d %q", task.TaskID, memText, j+1, g[0])
					}
				}
				if keep == 1 && k >= 2 {
					// The first search's observation is gone from the final
					// context: the answer it gave lives on only in <mem>.
					ctx := tok.Decode(records.IDs(last.ContextIDs))
					if strings.Contains(ctx, r.Steps[0].InfoText) {
						t.Fatalf("%s: keep 1 context still holds the first observation", task.TaskID)
					}
				}
			}
		}
	}
}

// checkCopies checks what the world's markers are for: every query and the
// answer start with a marker and go on with exactly the ids that follow the
// marker's latest earlier occurrence in what the step sees (its context and
// its own output so far), so each copied id is the one after the id just
// written. (Latest: an answer step also sees the previous step's memory and
// query, which may still hold a two-hop question half done under the same
// marker.)
func checkCopies(t *testing.T, tk *tokenizer.Tokenizer, id string, r records.Rollout) {
	t.Helper()
	markers := map[int]bool{}
	for _, m := range MarkerTokens() {
		n, _ := tk.TokenID(m)
		markers[n] = true
	}
	open := map[int]bool{}
	for _, tag := range []string{"<search>", "<answer>"} {
		n, _ := tk.TokenID(tag)
		open[n] = true
	}
	for si, st := range r.Steps {
		out := records.IDs(st.OutputIDs)
		seen := append(records.IDs(st.ContextIDs), out...)
		at := -1
		for i, x := range out {
			if open[x] {
				at = i
			}
		}
		if at < 0 || at+2 >= len(out) || !markers[out[at+1]] {
			t.Fatalf("%s step %d: the action does not start with a marker: %q", id, si+1, st.OutputText)
		}
		m, body := out[at+1], out[at+2:len(out)-1] // up to the closing tag
		src := len(st.ContextIDs) + at + 1         // the action's marker in seen
		prev := -1
		for i := 0; i < src; i++ {
			if seen[i] == m {
				prev = i
			}
		}
		if prev < 0 || !slices.Equal(seen[prev+1:min(prev+1+len(body), src)], body) {
			t.Fatalf("%s step %d: %q is not a copy of what follows its marker", id, si+1, st.OutputText)
		}
	}
}

// data/world is the generator's output for seed 1 with the default sizes:
// regenerate it and compare byte for byte.
func TestDefaultInstanceIsGenerated(t *testing.T) {
	shipped := filepath.Join("..", "..", "data", "world")
	if _, err := os.Stat(filepath.Join(shipped, ManifestFile)); err != nil {
		t.Skipf("no default instance at %s: %v", shipped, err)
	}
	dir := t.TempDir()
	if _, err := Write(dir, DefaultConfig(1), DefaultSizes()); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		want, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(shipped, e.Name()))
		if err != nil {
			t.Fatalf("data/world lacks %s: %v", e.Name(), err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("data/world/%s differs from `mempo-rollout world --seed 1` (regenerate it)", e.Name())
		}
	}
}

// A fact-shuffled variant keeps the world's names, held-out people,
// tokenizer and model config, and draws its facts, corpus and tasks again.
func TestFactVariants(t *testing.T) {
	base, err := Generate(DefaultConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(1)
	cfg.FactSeed = 1
	v1, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.FactSeed = 2
	v2, _ := Generate(cfg)
	for _, v := range []*World{v1, v2} {
		if strings.Join(v.People, ",") != strings.Join(base.People, ",") || strings.Join(v.Companies, ",") != strings.Join(base.Companies, ",") ||
			strings.Join(v.Cities, ",") != strings.Join(base.Cities, ",") || strings.Join(v.Products, ",") != strings.Join(base.Products, ",") {
			t.Fatal("a variant changed the entities")
		}
		if len(v.Test) != len(base.Test) {
			t.Fatalf("%d held-out people, want %d", len(v.Test), len(base.Test))
		}
		for p := range base.Test {
			if !v.Test[p] {
				t.Fatalf("%s is held out in the world but not in a variant", p)
			}
		}
	}
	// About 1/40 of the people keep their city by chance; most must move.
	moved, moved12 := 0, 0
	for _, p := range base.People {
		if v1.Facts[p]["city"] != base.Facts[p]["city"] {
			moved++
		}
		if v1.Facts[p]["city"] != v2.Facts[p]["city"] {
			moved12++
		}
	}
	if moved < len(base.People)*9/10 || moved12 < len(base.People)*9/10 {
		t.Fatalf("only %d and %d of %d people changed city between variants", moved, moved12, len(base.People))
	}
	tb, _, _ := base.Tasks(Train, 2, 4, 1)
	tv, _, _ := v1.Tasks(Train, 2, 4, 1)
	if tb[0].Prompt == tv[0].Prompt || tb[0].TaskID == tv[0].TaskID {
		t.Fatalf("a variant drew the world's tasks: %q %q", tb[0].TaskID, tv[0].TaskID)
	}
	// Every gold of a variant's task is the variant's fact, and its corpus
	// states it.
	_, qs, _ := v1.Tasks(Train, 2, 20, 1)
	corpus := map[string]bool{}
	for _, p := range v1.Corpus {
		corpus[p.Contents] = true
	}
	for _, tq := range qs {
		for _, q := range tq {
			for _, l := range q.Lookups {
				if l.Value != v1.Facts[l.Entity][l.Attr] || !corpus["\""+l.Entity+"\"\n"+FactText(l)] {
					t.Fatalf("lookup %+v is not the variant's fact in its corpus", l)
				}
			}
		}
	}

	// The written files: the same tokenizer and model config, byte for byte.
	s := DefaultSizes()
	s.SFTTasks, s.RLTasks, s.TestTasks = 8, 0, 0
	dirs := []string{t.TempDir(), t.TempDir()}
	for i, dir := range dirs {
		c := DefaultConfig(1)
		c.FactSeed = uint64(i * 3)
		if _, err := Write(dir, c, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{TokenizerFile, TokConfigFile, ModelConfigFile, CorpusFile} {
		a, _ := os.ReadFile(filepath.Join(dirs[0], f))
		b, _ := os.ReadFile(filepath.Join(dirs[1], f))
		if same := bytes.Equal(a, b); same != (f != CorpusFile) || len(a) == 0 {
			t.Fatalf("%s: world and variant 3 equal = %v (%d, %d bytes)", f, same, len(a), len(b))
		}
	}
}
