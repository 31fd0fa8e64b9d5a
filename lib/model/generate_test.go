package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
)

// checkTeacherForced verifies that every row's decode-time log-probs equal
// the teacher-forced log-probs of prompt+output: this proves each KV-cache
// slot (including ones copied from a shared prefill) held the right keys.
func checkTeacherForced(t *testing.T, m *Model, prompt []int, g *Generation) {
	t.Helper()
	full := append(append([]int(nil), prompt...), g.IDs...)
	tf, err := m.LogProbs([][]int{full})
	if err != nil {
		t.Fatal(err)
	}
	for i, lp := range g.LogProbs {
		if d := math.Abs(float64(lp - tf[0][len(prompt)+i])); d > 1e-4 {
			t.Fatalf("request %d sample %d token %d: decode log-prob %g, teacher-forced %g", g.Request, g.Sample, i, lp, tf[0][len(prompt)+i])
		}
	}
}

func sameGeneration(t *testing.T, what string, a, b *Generation) {
	t.Helper()
	sameGenerationWithin(t, what, a, b, 1e-4)
}

// sameGenerationWithin: the same ids and finish, log-probs within tol.
func sameGenerationWithin(t *testing.T, what string, a, b *Generation, tol float64) {
	t.Helper()
	if !slices.Equal(a.IDs, b.IDs) || a.Finish != b.Finish {
		t.Fatalf("%s: ids %v (%s) vs %v (%s)", what, a.IDs, a.Finish, b.IDs, b.Finish)
	}
	for i := range a.LogProbs {
		if math.Abs(float64(a.LogProbs[i]-b.LogProbs[i])) > tol || math.Abs(float64(a.SampleLogProbs[i]-b.SampleLogProbs[i])) > tol {
			t.Fatalf("%s: log-probs differ at %d: %g %g vs %g %g", what, i, a.LogProbs[i], a.SampleLogProbs[i], b.LogProbs[i], b.SampleLogProbs[i])
		}
	}
}

func TestBatchedSamplingEqualsAlone(t *testing.T) {
	m := loadFixture(t, "qwen3-qknorm-bias-untied")
	long := []int{5, 17, 99, 230, 8, 64, 3, 3, 200, 41, 77, 12}
	short := []int{300, 2, 150}
	opts := GenerateOptions{MaxTokens: 20, Sampling: SampleParams{Temperature: 0.9, TopP: 0.95, TopK: 50}, IgnoreEOS: true}
	both, err := m.Generate([]Request{{Prompt: long, N: 3, Seed: 11}, {Prompt: short, Seed: 12}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(both) != 4 {
		t.Fatalf("%d generations, want 4", len(both))
	}
	aloneLong, _ := m.Generate([]Request{{Prompt: long, N: 3, Seed: 11}}, opts)
	aloneShort, _ := m.Generate([]Request{{Prompt: short, Seed: 12}}, opts)
	for i := 0; i < 3; i++ {
		sameGeneration(t, "long prompt sample", both[i], aloneLong[i])
		checkTeacherForced(t, m, long, both[i])
	}
	sameGeneration(t, "short prompt", both[3], aloneShort[0])
	checkTeacherForced(t, m, short, both[3])
	// The samples of one prompt must differ from each other (independent
	// streams), or the shared prefill would be suspect.
	if slices.Equal(both[0].IDs, both[1].IDs) && slices.Equal(both[1].IDs, both[2].IDs) {
		t.Error("three samples of one prompt are identical")
	}
	// Reproducible: the same seeds give the same tokens, another seed others.
	again, _ := m.Generate([]Request{{Prompt: long, N: 3, Seed: 11}, {Prompt: short, Seed: 12}}, opts)
	for i := range again {
		sameGeneration(t, "rerun", again[i], both[i])
	}
	other, _ := m.Generate([]Request{{Prompt: long, N: 1, Seed: 99}}, opts)
	if slices.Equal(other[0].IDs, both[0].IDs) {
		t.Error("another seed gave the same sample")
	}
	for _, g := range both {
		for i, slp := range g.SampleLogProbs {
			// Temperature < 1 and filters sharpen: the sampled token is at
			// least as likely under the sampling distribution.
			if slp > 0 || slp < g.LogProbs[i]-1e-4 && g.LogProbs[i] > -3 {
				t.Errorf("sample log-prob %g vs policy log-prob %g", slp, g.LogProbs[i])
			}
		}
	}
}

func TestTopK1IsGreedy(t *testing.T) {
	m := loadFixture(t, "qwen2-untied-gqa4")
	g := openGolden(t, "qwen2-untied-gqa4")
	prompt, want := g.ids(t, "greedy.prompt"), g.ids(t, "greedy.output")
	got, err := m.Generate([]Request{{Prompt: prompt, N: 2, Seed: 4}},
		GenerateOptions{MaxTokens: len(want), Sampling: SampleParams{Temperature: 1.3, TopK: 1}, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got {
		if !slices.Equal(r.IDs, want) {
			t.Fatalf("top-k 1 gave %v, greedy is %v", r.IDs, want)
		}
		for _, s := range r.SampleLogProbs {
			if s != 0 {
				t.Fatalf("top-k 1 sample log-prob %g, want 0", s)
			}
		}
	}
}

func TestStopConditions(t *testing.T) {
	m := loadFixture(t, "qwen2-tied-gqa1")
	g := openGolden(t, "qwen2-tied-gqa1")
	prompt, want := g.ids(t, "greedy.prompt"), g.ids(t, "greedy.output")
	gen := func(opts GenerateOptions) *Generation {
		t.Helper()
		out, err := m.Generate([]Request{{Prompt: prompt}}, opts)
		if err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	// EOS: pretend the 5th greedy token is EOS.
	r := gen(GenerateOptions{MaxTokens: 32, EOS: []int{want[4]}})
	if r.Finish != "eos" || !slices.Equal(r.IDs, want[:firstIndex(want, want[4])+1]) {
		t.Errorf("eos: %v %s", r.IDs, r.Finish)
	}
	r = gen(GenerateOptions{MaxTokens: 32, EOS: []int{want[4]}, IgnoreEOS: true})
	if r.Finish != "length" || len(r.IDs) != 32 {
		t.Errorf("ignore eos: %d tokens, %s", len(r.IDs), r.Finish)
	}
	// Stop on an id sequence.
	r = gen(GenerateOptions{MaxTokens: 32, StopIDs: [][]int{{want[6], want[7]}}})
	if r.Finish != "stop" || len(r.IDs) > 8 || !slices.Equal(r.IDs[len(r.IDs)-2:], want[6:8]) {
		t.Errorf("stop ids: %v %s", r.IDs, r.Finish)
	}
	// Stop on decoded text (a stand-in decoder: one letter per id).
	decode := func(ids []int) string {
		var b strings.Builder
		for _, id := range ids {
			b.WriteByte(byte('a' + id%26))
		}
		return b.String()
	}
	stop := decode(want[9:12])
	r = gen(GenerateOptions{MaxTokens: 32, StopStrings: []string{stop}, Decode: decode})
	if r.Finish != "stop" || !strings.Contains(decode(r.IDs), stop) || strings.Contains(decode(r.IDs[:len(r.IDs)-1]), stop) {
		t.Errorf("stop string %q: %q %s", stop, decode(r.IDs), r.Finish)
	}
	r = gen(GenerateOptions{MaxTokens: 5})
	if r.Finish != "length" || !slices.Equal(r.IDs, want[:5]) {
		t.Errorf("max tokens: %v %s", r.IDs, r.Finish)
	}
	if _, err := m.Generate([]Request{{Prompt: nil}}, GenerateOptions{MaxTokens: 1}); err == nil {
		t.Error("empty prompt accepted")
	}
	if _, err := m.Generate([]Request{{Prompt: []int{320}}}, GenerateOptions{MaxTokens: 1}); err == nil {
		t.Error("out-of-vocabulary prompt accepted")
	}
}

func firstIndex(xs []int, x int) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// sampleRow on a known distribution: probabilities 0.5, 0.3, 0.2 (as logits
// in a shuffled order) and a grid of uniforms, so counts are exact.
func TestSampleRowFilters(t *testing.T) {
	z := []float32{float32(math.Log(0.2)), float32(math.Log(0.5)), float32(math.Log(0.3))}
	counts := func(p SampleParams) [3]int {
		var c [3]int
		for i := 0; i < 1000; i++ {
			s := sampleRow(z, p, (float64(i)+0.5)/1000)
			c[s.ID]++
			if d := math.Abs(float64(s.LogProb) - math.Log([]float64{0.2, 0.5, 0.3}[s.ID])); d > 1e-6 {
				t.Fatalf("policy log-prob of %d: %g", s.ID, s.LogProb)
			}
		}
		return c
	}
	cases := []struct {
		p    SampleParams
		want [3]int
	}{
		{SampleParams{Temperature: 1}, [3]int{200, 500, 300}},
		{SampleParams{Temperature: 1, TopP: 1}, [3]int{200, 500, 300}},
		// HF semantics: keep while the mass before a token is < p.
		{SampleParams{Temperature: 1, TopP: 0.5}, [3]int{0, 1000, 0}},
		{SampleParams{Temperature: 1, TopP: 0.500001}, [3]int{0, 625, 375}},
		{SampleParams{Temperature: 1, TopP: 1e-9}, [3]int{0, 1000, 0}},
		{SampleParams{Temperature: 1, TopP: 0.81}, [3]int{200, 500, 300}},
		{SampleParams{Temperature: 1, TopK: 2}, [3]int{0, 625, 375}},
		// Top-p acts on the distribution renormalized after top-k (0.625, 0.375).
		{SampleParams{Temperature: 1, TopK: 2, TopP: 0.62}, [3]int{0, 1000, 0}},
		{SampleParams{Temperature: 1, TopK: 2, TopP: 0.63}, [3]int{0, 625, 375}},
		{SampleParams{Temperature: 0}, [3]int{0, 1000, 0}},
	}
	for _, c := range cases {
		if got := counts(c.p); got != c.want {
			t.Errorf("%+v: counts %v, want %v", c.p, got, c.want)
		}
	}
	// Sample log-prob is under the filtered, renormalized distribution.
	s := sampleRow(z, SampleParams{Temperature: 1, TopK: 2}, 0.99)
	if s.ID != 2 || math.Abs(float64(s.SampleLogProb)-math.Log(0.3/0.8)) > 1e-6 {
		t.Errorf("top-k 2 draw: %+v", s)
	}
	// Temperature 2 flattens: weights ∝ p^(1/2).
	s = sampleRow(z, SampleParams{Temperature: 2}, 0.0)
	norm := math.Sqrt(0.2) + math.Sqrt(0.5) + math.Sqrt(0.3)
	if s.ID != 0 || math.Abs(float64(s.SampleLogProb)-math.Log(math.Sqrt(0.2)/norm)) > 1e-6 {
		t.Errorf("temperature 2 draw: %+v", s)
	}
}

// Top-p over a large vocabulary exercises the candidate pruning: its result
// must equal a full sort.
func TestSampleRowLargeVocabularyTopP(t *testing.T) {
	z := make([]float32, 5000)
	for i := range z {
		z[i] = float32(math.Sin(float64(i)*1.7)) * 3
	}
	for _, p := range []float64{0.3, 0.9, 0.999} {
		for _, u := range []float64{0, 0.37, 0.999999} {
			got := sampleRow(z, SampleParams{Temperature: 0.7, TopP: p}, u)
			want := referenceTopP(z, 0.7, p, u)
			if got.ID != want {
				t.Errorf("p=%g u=%g: got %d, full sort gives %d", p, u, got.ID, want)
			}
		}
	}
}

func referenceTopP(z []float32, temp, p, u float64) int {
	type tw struct {
		id int
		w  float64
	}
	m := math.Inf(-1)
	for _, v := range z {
		m = math.Max(m, float64(v))
	}
	all := make([]tw, len(z))
	var total float64
	for i, v := range z {
		all[i] = tw{i, math.Exp((float64(v) - m) / temp)}
		total += all[i].w
	}
	sort.SliceStable(all, func(a, b int) bool { return all[a].w > all[b].w })
	var cum float64
	n := 0
	for n < len(all) && (n == 0 || cum < p*total) {
		cum += all[n].w
		n++
	}
	target, c := u*cum, 0.0
	for _, x := range all[:n] {
		c += x.w
		if c > target {
			return x.id
		}
	}
	return all[n-1].id
}

// sharedPromptCase builds the requests of a rollout turn: for each of 3
// tasks a first turn (the prompt, 3 samples) and 3 later turns (the prompt ⊕
// a trajectory's own ids), one of them asked twice, one continuing another
// (a chain), one branching off it with ids of its own; and two short prompts
// that share nothing.
func sharedPromptCase(r *rand.Rand, vocab int) []Request {
	randIDs := func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = r.IntN(vocab)
		}
		return s
	}
	var reqs []Request
	seed := uint64(1)
	add := func(p []int, n int) {
		reqs = append(reqs, Request{Prompt: p, N: n, Seed: seed})
		seed++
	}
	for task := 0; task < 3; task++ {
		prompt := randIDs(40 + 10*task)
		add(prompt, 3)
		a := append(slices.Clone(prompt), randIDs(12+task)...)
		b := append(slices.Clone(a), randIDs(7)...)
		add(b, 1)
		add(a, 1)
		add(slices.Clone(a), 2)
		add(append(slices.Clone(a), randIDs(9)...), 1) // a branch off the chain: its own 9 ids after a's
	}
	add(randIDs(9), 1)
	add(randIDs(3), 2)
	return reqs
}

// checkSharedPrefill generates the same turn with shared prefixes and with
// every prompt prefilled whole, in one prefill forward and in forwards of
// at most 60 ids (sources then sit in earlier forwards): the tokens must be
// the same and the log-probs within tol (what differs is which forward
// computed a prefix's keys and values), and sharing must have saved most of
// the prompts' ids. With each sample's own copy of its prompt in the cache
// (GenerateOptions.CopyPrompts) the bits must be the same.
func checkSharedPrefill(t *testing.T, m *Model, tol float64) {
	t.Helper()
	reqs := sharedPromptCase(rand.New(rand.NewPCG(7, 8)), m.VocabSize())
	for _, c := range []struct {
		temp   float64
		budget int
	}{{0, 0}, {1, 0}, {0, 60}, {1, 60}} {
		temp := c.temp
		opts := GenerateOptions{MaxTokens: 12, Sampling: SampleParams{Temperature: temp, TopP: 1}, IgnoreEOS: true, PrefillIDs: c.budget}
		var ran, ids int
		opts.OnPrefill = func(r, n int) { ran, ids = r, n }
		got, err := m.Generate(reqs, opts)
		if err != nil {
			t.Fatal(err)
		}
		if ids == 0 || 2*ran > ids {
			t.Fatalf("temperature %g: the prefill ran %d of the prompts' %d ids", temp, ran, ids)
		}
		opts.NoSharedPrefixes = true
		var ranWhole int
		opts.OnPrefill = func(r, n int) { ranWhole = r }
		want, err := m.Generate(reqs, opts)
		if err != nil {
			t.Fatal(err)
		}
		if ranWhole != ids {
			t.Fatalf("unshared prefill ran %d of %d ids", ranWhole, ids)
		}
		if len(got) != len(want) {
			t.Fatalf("%d generations, want %d", len(got), len(want))
		}
		worst := 0.0
		for i := range want {
			g, w := got[i], want[i]
			if g.Request != w.Request || g.Sample != w.Sample || !slices.Equal(g.IDs, w.IDs) {
				t.Fatalf("temperature %g row %d (request %d sample %d): ids %v, unshared %v", temp, i, w.Request, w.Sample, g.IDs, w.IDs)
			}
			for k := range w.LogProbs {
				d := math.Abs(float64(g.LogProbs[k] - w.LogProbs[k]))
				worst = max(worst, d)
				if d > tol {
					t.Fatalf("temperature %g row %d token %d: log-prob %g, unshared %g", temp, i, k, g.LogProbs[k], w.LogProbs[k])
				}
			}
		}
		// Every row's own copy of its prompt (the layout before samples
		// shared one) gives the same bits: only the rows the keys are read
		// from differ.
		opts.NoSharedPrefixes, opts.CopyPrompts, opts.OnPrefill = false, true, nil
		copied, err := m.Generate(reqs, opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if !slices.Equal(got[i].IDs, copied[i].IDs) || !equalF32(got[i].LogProbs, copied[i].LogProbs) ||
				!equalF32(got[i].SampleLogProbs, copied[i].SampleLogProbs) || got[i].Finish != copied[i].Finish {
				t.Fatalf("temperature %g row %d: shared prompts %v %v, copied %v %v", temp, i, got[i].IDs, got[i].LogProbs, copied[i].IDs, copied[i].LogProbs)
			}
		}
		if temp == 1 && tol <= 1e-4 { // bf16 decoding differs from LogProbs by more
			checkTeacherForced(t, m, reqs[1].Prompt, got[3])
		}
		t.Logf("temperature %g, %d ids a prefill forward: prefill ran %d of %d ids; max |Δ log-prob| %.2g", temp, c.budget, ran, ids, worst)
	}
}

func TestGenerateSharedPrefixes(t *testing.T) {
	for _, qwen3 := range []bool{false, true} {
		cfg := tinyConfig(qwen3)
		cfg.MaxPositions = 512
		checkSharedPrefill(t, randomModel(t, cfg, 5), 2e-5)
	}
	checkSharedPrefill(t, loadFixture(t, "qwen2-untied-gqa4"), 2e-5)
}

// TestEmuGenerateSharedPrefixes runs the shared prefill on the CUDA
// backend's op-by-op path over the kernel emulation (its gathers and
// scatters of copied cache rows, the attention of continuations).
func TestEmuGenerateSharedPrefixes(t *testing.T) {
	checkSharedPrefill(t, loadFixtureOn(t, "qwen2-untied-gqa4", emuCUDA(t)), 1e-4)
}

// TestCUDAGenerateSharedPrefixes: the same on the GPU, in fp32 and bf16
// mode, on every fixture, graphs and the decoding step included.
func TestCUDAGenerateSharedPrefixes(t *testing.T) {
	eachCUDAMode(t, fixtureCases, func(t *testing.T, m *Model, tol float64) { checkSharedPrefill(t, m, tol) })
}

// eachCUDAMode runs f as a subtest on each named fixture on the GPU, in
// fp32 and in bf16 mode, with the log-prob tolerance of decoding against
// the CPU's sums there (bf16 products round their operands).
func eachCUDAMode(t *testing.T, names []string, f func(t *testing.T, m *Model, tol float64)) {
	cudaOrSkip(t)
	for _, name := range names {
		for _, bf16 := range []bool{false, true} {
			be := cudaOrSkip(t)
			be.SetBF16(bf16)
			tol := 1e-4
			if bf16 {
				tol = 5e-2
			}
			t.Run(fmt.Sprintf("%s/bf16=%v", name, bf16), func(t *testing.T) {
				f(t, loadFixtureOn(t, name, be), tol)
			})
		}
	}
}

// TestCacheLayout plays a generation's cache writes and reads with token
// marks instead of keys and values (playCacheLayout), for the shared and the
// copied layout, with and without shared beginnings, on sharedPromptCase and
// on 200 random turns of chains and branches. CacheRows is the layout's
// size; with shared prompts it is at most every prompt once and the new
// tokens, and on sharedPromptCase with the beginnings shared too, less.
func TestCacheLayout(t *testing.T) {
	const maxTokens = 5
	cases := [][]Request{sharedPromptCase(rand.New(rand.NewPCG(3, 4)), 50)}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		cases = append(cases, randomTurn(rng))
	}
	for k, reqs := range cases {
		bound := 0 // every prompt once, maxTokens rows a sample
		for _, q := range reqs {
			bound += len(q.Prompt) + max(q.N, 1)*maxTokens
		}
		for _, c := range []struct {
			copyPrompts, unshared bool
		}{{false, false}, {false, true}, {true, false}, {true, true}} {
			opts := GenerateOptions{MaxTokens: maxTokens, CopyPrompts: c.copyPrompts, NoSharedPrefixes: c.unshared}
			what := fmt.Sprintf("case %d, copied %v, unshared beginnings %v", k, c.copyPrompts, c.unshared)
			rows := playCacheLayout(t, what, reqs, prefillPlan(reqs, opts.NoSharedPrefixes), opts)
			if CacheRows(reqs, opts) != rows || !c.copyPrompts && (rows > bound || k == 0 && !c.unshared && rows == bound) {
				t.Fatalf("%s: %d cache rows, CacheRows %d, every prompt once %d", what, rows, CacheRows(reqs, opts), bound)
			}
			if k == 0 {
				t.Logf("%s: %d cache rows (every prompt once: %d)", what, rows, bound)
			}
		}
	}
}

// TestCacheLayoutPlans plays layouts of sharing plans that planSharing's
// longest-first order does not make: a one-sample request continuing
// another beyond that one's own shared part (its beginning is then in two
// runs: it must hold its prompt, copied in two runs), and a request of two
// samples continuing a one-sample request within that one's shared part.
func TestCacheLayoutPlans(t *testing.T) {
	h := make([]int, 60)
	for i := range h {
		h[i] = i + 1
	}
	c := append(slices.Clone(h[:50]), 100)      // continues h for 50 ids
	r2 := append(slices.Clone(c), 200)          // continues c beyond c's shared part
	r := append(slices.Clone(h[:40]), 300, 301) // continues c within its shared part, two samples
	reqs := []Request{{Prompt: h}, {Prompt: c}, {Prompt: r2}, {Prompt: r, N: 2}}
	plan := sharePlan{source: []int{-1, 0, 1, 1}, prefix: []int{0, 50, 51, 40}, order: []int{0, 1, 2, 3}}
	opts := GenerateOptions{MaxTokens: 4}
	L := layoutCache(reqs, plan, opts, opts.MaxTokens)
	if L.req[1].PN != 50 || L.req[2].PN != 0 || len(L.copies[2]) != 2 || L.req[3].PN != 0 {
		t.Errorf("placements %+v, copies %+v", L.req, L.copies)
	}
	playCacheLayout(t, "hand-made plan", reqs, plan, opts)
}

// randomTurn is a rollout turn of chains and branches: for each of 1 to 4
// tasks a prompt of 35 to 80 ids, then requests that each take a beginning
// of an earlier one of the task (possibly all of it) and add 0 to 15 ids of
// their own, with 1, 2 or 4 samples.
func randomTurn(rng *rand.Rand) []Request {
	var reqs []Request
	for range 1 + rng.IntN(4) {
		task := []int{}
		for range 35 + rng.IntN(46) {
			task = append(task, rng.IntN(50))
		}
		mine := []Request{{Prompt: task, N: 1 + rng.IntN(3)}}
		for range rng.IntN(7) {
			from := mine[rng.IntN(len(mine))].Prompt
			p := slices.Clone(from[:1+rng.IntN(len(from))])
			for range rng.IntN(16) {
				p = append(p, rng.IntN(50))
			}
			mine = append(mine, Request{Prompt: p, N: []int{1, 1, 1, 2, 4}[rng.IntN(5)]})
		}
		reqs = append(reqs, mine...)
	}
	rng.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
	return reqs
}

// playCacheLayout plays reqs' generation under plan and opts with token marks: each
// request's prefill (in the plan's order) writes its ids at rows K+Past+i,
// then its copies run (as layerForward), and it reads every key of its
// prompt; then each row writes its new tokens at K+pos step by step, and
// every key a step reads must be the right request's id or the row's own
// token (so nothing overwrote a mark that is read later). It returns the
// layout's rows.
func playCacheLayout(t *testing.T, what string, reqs []Request, plan sharePlan, opts GenerateOptions) int {
	t.Helper()
	L := layoutCache(reqs, plan, opts, opts.MaxTokens)
	mark := make([]int, L.rows) // a prompt id + 1, or -(1 + row·100000 + position) for a new token
	for i := range mark {
		mark[i] = math.MinInt
	}
	write := func(row, v int) {
		if row < 0 || row >= L.rows {
			t.Fatalf("%s: a write to row %d of %d", what, row, L.rows)
		}
		mark[row] = v
	}
	read := func(s AttnSeq, j, want int, who string) {
		if r := s.keyRow(j); r < 0 || r >= L.rows || mark[r] != want {
			t.Fatalf("%s: %s reads key %d at row %d: %d, want %d", what, who, j, r, mark[max(0, min(r, L.rows-1))], want)
		}
	}
	for _, r := range plan.order {
		p, pre := reqs[r].Prompt, plan.prefix[r]
		s := L.req[r]
		s.N, s.Past = len(p)-pre, pre
		s.checkPrefix()
		for t := pre; t < len(p); t++ {
			write(s.K+t, p[t]+1)
		}
		for _, run := range L.copies[r] {
			for k := 0; k < run.n; k++ {
				write(run.dst+k, mark[run.src+k])
			}
		}
		for j := range p {
			read(s, j, p[j]+1, fmt.Sprintf("request %d's prefill", r))
		}
	}
	var rowReq []int
	for r, q := range reqs {
		for range max(q.N, 1) {
			rowReq = append(rowReq, r)
		}
	}
	for step := 0; step < opts.MaxTokens-1; step++ {
		for i, r := range rowReq {
			pos := len(reqs[r].Prompt) + step
			s := L.decodeSeq(i, pos)
			write(s.K+pos, -(1 + i*100000 + pos))
		}
		for i, r := range rowReq {
			p := reqs[r].Prompt
			pos := len(p) + step
			s := L.decodeSeq(i, pos)
			for j := 0; j <= pos; j++ {
				want := -(1 + i*100000 + j)
				if j < len(p) {
					want = p[j] + 1
				}
				read(s, j, want, fmt.Sprintf("row %d at position %d", i, pos))
			}
		}
	}
	return L.rows
}
