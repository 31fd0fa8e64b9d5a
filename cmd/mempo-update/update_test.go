package main

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/safetensors"
	"github.com/mempo/mempo/lib/testenv"
	"github.com/mempo/mempo/lib/update"
)

// runUpdateCmd runs the mempo-update app (root action and subcommands) with
// args, as the binary would.
// asMain makes the test binary act as mempo-update (testenv.CommandMain).
var asMain = envconfig.UpdateAsMain.Name

func TestMain(m *testing.M) { testenv.CommandMain(m, "mempo-update", asMain, main) }

// The file-in/file-out cases of testdata/cases: flags refused before any
// file is read, one stderr line, nothing written.
func TestCases(t *testing.T) { testenv.RunCases(t, asMain) }

func runUpdateCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	app := newApp()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	err := app.Run(append([]string{"mempo-update"}, args...))
	return out.String(), err
}

func updTinyConfig(vocab int) *checkpoint.Config {
	return &checkpoint.Config{
		Architecture: checkpoint.ArchQwen2, ModelType: "qwen2",
		VocabSize: vocab, HiddenSize: 16, IntermediateSize: 24, NumLayers: 2,
		NumHeads: 2, NumKVHeads: 1, HeadDim: 8, MaxPositions: 128,
		RopeTheta: 10000, RMSNormEps: 1e-6, TieWordEmbeddings: true, AttentionBias: true,
		InitializerRange: 0.3, EOSTokenIDs: []int{vocab - 1},
	}
}

// updWriteModel writes a random model directory (initializer range 0.3, so
// the distributions are far from uniform) and returns it loaded.
func updWriteModel(t *testing.T, dir string, vocab int, seed int64) *model.Model {
	t.Helper()
	cfg := updTinyConfig(vocab)
	w := checkpoint.RandomInit(cfg, seed)
	if err := checkpoint.Save(dir, cfg, w, checkpoint.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// updWriteRollouts writes tasks×G synthetic rollouts of two steps whose
// log-probs are m's, with rewards that differ within each group.
func updWriteRollouts(t *testing.T, path string, m *model.Model, tasks, G int) []records.Rollout {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(tasks*G), 1))
	V := m.VocabSize()
	var rolls []records.Rollout
	for task := 0; task < tasks; task++ {
		for g := 0; g < G; g++ {
			ro := records.Rollout{TaskID: "task" + string(rune('0'+task)), K: 1, Golds: [][]string{{"x"}}, Group: int64(task), Sample: int32(g),
				RewardTask: float64((g + task) % 2)}
			for st := 0; st < 2; st++ {
				ctx := make([]int32, 4+r.IntN(4))
				out := make([]int32, 3+r.IntN(4))
				var seq []int
				for i := range ctx {
					ctx[i] = int32(r.IntN(V))
					seq = append(seq, int(ctx[i]))
				}
				for i := range out {
					out[i] = int32(r.IntN(V))
					seq = append(seq, int(out[i]))
				}
				lp, err := m.LogProbs([][]int{seq})
				if err != nil {
					t.Fatal(err)
				}
				step := records.Step{Index: int32(st), ContextIDs: ctx, OutputIDs: out, Logprobs: lp[0][len(ctx):], MemStart: 0, MemEnd: 2,
					RMem: records.Ptr(float64(r.IntN(5)) / 10)}
				ro.Steps = append(ro.Steps, step)
				ro.TotalTokens += int64(len(seq))
				ro.PeakTokens = max(ro.PeakTokens, int64(len(seq)))
			}
			rolls = append(rolls, ro)
		}
	}
	if err := records.WriteFile(path, rolls); err != nil {
		t.Fatal(err)
	}
	return rolls
}

type updFixture struct {
	root, model, ref, rollouts string
}

func newUpdFixture(t *testing.T) updFixture {
	root := t.TempDir()
	f := updFixture{root: root, model: filepath.Join(root, "policy"), ref: filepath.Join(root, "ref"), rollouts: filepath.Join(root, "r.jsonl")}
	m := updWriteModel(t, f.model, 32, 1)
	updWriteModel(t, f.ref, 32, 2)
	updWriteRollouts(t, f.rollouts, m, 2, 3)
	return f
}

func readTensors(t *testing.T, path string) map[string][]float32 {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]float32{}
	for _, n := range f.Names() {
		if info, _ := f.Info(n); info.DType == safetensors.I64 {
			continue
		}
		v, _, err := f.Float32(n)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = v
	}
	return out
}

func sameTensors(t *testing.T, what string, a, b map[string][]float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d vs %d tensors", what, len(a), len(b))
	}
	for n, v := range a {
		w := b[n]
		for i := range v {
			if math.Float32bits(v[i]) != math.Float32bits(w[i]) {
				t.Fatalf("%s: %s[%d] = %v vs %v", what, n, i, v[i], w[i])
			}
		}
	}
}

func maxDiff(a, b map[string][]float32) float64 {
	d := 0.0
	for n, v := range a {
		for i := range v {
			d = math.Max(d, math.Abs(float64(v[i]-b[n][i])))
		}
	}
	return d
}

// knobArgs pin the CPU: the bit-identity claims are the CPU backend's.
var knobArgs = []string{"--lr", "1e-3", "--kl-coef", "0.01", "--epochs", "2", "--mini-batch", "4", "--seed", "7", "--device", "cpu"}

// grad shards on "other machines" + apply equal the single-process update
// with the same shard count bit for bit, over a two-step plan; a different
// shard count agrees to float rounding.
func TestGradApplyEqualsUpdate(t *testing.T) {
	f := newUpdFixture(t)
	one := filepath.Join(f.root, "one")
	args := append([]string{"--model", f.model, "--ref", f.ref, "--rollouts", f.rollouts, "--out", one, "--grad-shards", "2",
		"--golden", filepath.Join(f.root, "golden.safetensors")}, knobArgs...)
	if msg, err := runUpdateCmd(t, args...); err != nil {
		t.Fatal(msg, err)
	}
	// 6 trajectories, mini-batch 4, 2 epochs: 4 optimizer steps.
	cur := f.model
	for k := 0; k < 4; k++ {
		var grads []string
		for i := 0; i < 2; i++ {
			g := filepath.Join(f.root, "g"+string(rune('0'+k))+string(rune('0'+i))+".safetensors")
			a := append([]string{"grad", "--model", cur, "--ref", f.ref, "--rollouts", f.rollouts, "--out", g,
				"--shard", string(rune('0'+i)) + "/2", "--plan-step", string(rune('0' + k))}, knobArgs...)
			if msg, err := runUpdateCmd(t, a...); err != nil {
				t.Fatal(msg, err)
			}
			grads = append(grads, g)
		}
		next := filepath.Join(f.root, "apply"+string(rune('0'+k)))
		// Shards given in reverse order: apply sums them by index.
		if msg, err := runUpdateCmd(t, "apply", "--model", cur, "--grads", grads[1], "--grads", grads[0], "--out", next, "--lr", "1e-3"); err != nil {
			t.Fatal(msg, err)
		}
		cur = next
	}
	sameTensors(t, "weights", readTensors(t, filepath.Join(one, "model.safetensors")), readTensors(t, filepath.Join(cur, "model.safetensors")))
	sameTensors(t, "optimizer", readTensors(t, filepath.Join(one, update.OptimizerFile)), readTensors(t, filepath.Join(cur, update.OptimizerFile)))
	r1, _ := records.ReadFile[records.Update](filepath.Join(one, update.MetricsFile))
	r2, _ := records.ReadFile[records.Update](filepath.Join(cur, update.MetricsFile))
	if len(r1) != 4 || len(r2) != 4 {
		t.Fatalf("%d and %d metrics rows, want 4", len(r1), len(r2))
	}
	for i := range r1 {
		a, b := r1[i], r2[i]
		a.WallS, b.WallS, a.Policy, b.Policy = 0, 0, "", ""
		if !reflect.DeepEqual(a, b) {
			t.Errorf("row %d: update %+v\napply %+v", i, a, b)
		}
	}
	// A different step out of order is refused.
	bad := append([]string{"grad", "--model", f.model, "--ref", f.ref, "--rollouts", f.rollouts, "--out", filepath.Join(f.root, "x.safetensors"),
		"--shard", "0/2", "--plan-step", "2"}, knobArgs...)
	if _, err := runUpdateCmd(t, bad...); err == nil || !strings.Contains(err.Error(), "not the checkpoint apply wrote") {
		t.Errorf("step 2 on the starting model: %v", err)
	}

	// One shard instead of two: same to float32 rounding after 4 AdamW steps.
	plain := filepath.Join(f.root, "plain")
	args = append([]string{"--model", f.model, "--ref", f.ref, "--rollouts", f.rollouts, "--out", plain}, knobArgs...)
	if msg, err := runUpdateCmd(t, args...); err != nil {
		t.Fatal(msg, err)
	}
	w0 := readTensors(t, filepath.Join(f.model, "model.safetensors"))
	w1 := readTensors(t, filepath.Join(one, "model.safetensors"))
	wp := readTensors(t, filepath.Join(plain, "model.safetensors"))
	moved, diff := maxDiff(w0, w1), maxDiff(w1, wp)
	t.Logf("parameters moved by up to %.3g; 1 vs 2 shards differ by up to %.3g", moved, diff)
	if !(moved > 1e-3) || diff > 0.05*moved {
		t.Errorf("moved %v, 1 vs 2 shards %v", moved, diff)
	}

	// The golden logits are the written checkpoint's.
	g := readTensors(t, filepath.Join(f.root, "golden.safetensors"))
	m, err := model.Load(one, nil)
	if err != nil {
		t.Fatal(err)
	}
	gf, _ := safetensors.Open(filepath.Join(f.root, "golden.safetensors"))
	var seqs [][]int
	for _, name := range []string{"ids.0", "ids.1"} {
		ids, _, err := gf.Int64(name)
		if err != nil {
			t.Fatal(err)
		}
		seq := make([]int, len(ids))
		for i, x := range ids {
			seq[i] = int(x)
		}
		seqs = append(seqs, seq)
	}
	gf.Close()
	// Packed as the golden packed them: BLAS rounding depends on the shapes.
	lg, _ := m.Logits(seqs)
	sameTensors(t, "golden", map[string][]float32{"0": g["logits.0"], "1": g["logits.1"]}, map[string][]float32{"0": lg[0], "1": lg[1]})
}

// Stopping after one step and rerunning the same command reproduces the
// uninterrupted run bit for bit; a rerun of a finished run does nothing; the
// next update picks up the optimizer state from --model.
func TestResumeBitIdentical(t *testing.T) {
	f := newUpdFixture(t)
	full := filepath.Join(f.root, "full")
	args := append([]string{"--model", f.model, "--ref", f.ref, "--rollouts", f.rollouts, "--schedule", "cosine", "--warmup", "1", "--total-steps", "10"}, knobArgs...)
	if msg, err := runUpdateCmd(t, append(args, "--out", full)...); err != nil {
		t.Fatal(msg, err)
	}
	part := filepath.Join(f.root, "part")
	msg, err := runUpdateCmd(t, append(args, "--out", part, "--stop-after", "1")...)
	if err != nil || !strings.Contains(msg, "after step 1 of 4") {
		t.Fatal(msg, err)
	}
	msg, err = runUpdateCmd(t, append(args, "--out", part, "--stop-after", "2")...)
	if err != nil || !strings.Contains(msg, "resuming at step 1") {
		t.Fatal(msg, err)
	}
	metrics := filepath.Join(f.root, "m.parquet")
	if msg, err := runUpdateCmd(t, append(args, "--out", part, "--metrics", metrics)...); err != nil || !strings.Contains(msg, "resuming at step 3") {
		t.Fatal(msg, err)
	}
	for _, name := range []string{"model.safetensors", update.OptimizerFile} {
		a, _ := os.ReadFile(filepath.Join(full, name))
		b, _ := os.ReadFile(filepath.Join(part, name))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s differs between the uninterrupted and the resumed run", name)
		}
	}
	r1, _ := records.ReadFile[records.Update](filepath.Join(full, update.MetricsFile))
	r2, err := records.ReadFile[records.Update](metrics)
	if err != nil || len(r1) != 4 || len(r2) != 4 {
		t.Fatalf("rows %d, %d: %v", len(r1), len(r2), err)
	}
	for i := range r1 {
		r1[i].WallS, r2[i].WallS, r1[i].Policy, r2[i].Policy = 0, 0, "", ""
		if !reflect.DeepEqual(r1[i], r2[i]) {
			t.Errorf("row %d: %+v vs %+v", i, r1[i], r2[i])
		}
	}
	if r1[0].LR != 0 || r1[1].LR != 1e-3 || !(r1[3].LR < 1e-3) {
		t.Errorf("warmup+cosine rates %v %v %v %v", r1[0].LR, r1[1].LR, r1[2].LR, r1[3].LR)
	}
	if msg, err := runUpdateCmd(t, append(args, "--out", part)...); err != nil || !strings.Contains(msg, "nothing to do") {
		t.Errorf("rerun of a finished run: %q %v", msg, err)
	}
	// The next iteration continues the global step from --model's optimizer file.
	next := filepath.Join(f.root, "next")
	args2 := append([]string{"--model", full, "--ref", f.ref, "--rollouts", f.rollouts, "--out", next, "--schedule", "cosine", "--warmup", "1", "--total-steps", "10"}, knobArgs...)
	if msg, err := runUpdateCmd(t, args2...); err != nil {
		t.Fatal(msg, err)
	}
	r3, _ := records.ReadFile[records.Update](filepath.Join(next, update.MetricsFile))
	if len(r3) != 4 || r3[0].Step != 5 || math.Abs(r3[0].LR-schedLR(5)) > 1e-15 {
		t.Errorf("next iteration rows start at step %d lr %v", r3[0].Step, r3[0].LR)
	}
}

// schedLR is the cosine rate of the test's schedule at global step s (after
// s−1 updates).
func schedLR(s int) float64 {
	p := float64(s-1-1) / 9
	return 1e-3 * 0.5 * (1 + math.Cos(math.Pi*p))
}

func TestUpdateBadInput(t *testing.T) {
	f := newUpdFixture(t)
	out := filepath.Join(f.root, "out")
	rolls, _ := records.ReadFile[records.Rollout](f.rollouts)
	rolls[1].Steps[0].ContextIDs[0] = 40
	badIDs := filepath.Join(f.root, "bad.jsonl")
	records.WriteFile(badIDs, rolls)
	empty := filepath.Join(f.root, "empty.jsonl")
	os.WriteFile(empty, nil, 0o644)
	other := filepath.Join(f.root, "other")
	updWriteModel(t, other, 40, 3)

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"id beyond vocab", []string{"--model", f.model, "--ref", f.ref, "--rollouts", badIDs}, `bad.jsonl: row 2: field "steps[0].context_ids": id 40 at position 0 is outside the model's vocabulary [0, 32)`},
		{"empty rollouts", []string{"--model", f.model, "--ref", f.ref, "--rollouts", empty}, "empty.jsonl: no rollouts"},
		{"mismatched ref", []string{"--model", f.model, "--ref", other, "--rollouts", f.rollouts}, "checkpoint does not match the policy"},
		{"no ref", []string{"--model", f.model, "--rollouts", f.rollouts}, "missing required flag --ref (needed when --kl-coef is not 0)"},
		{"entropy bonus", []string{"--model", f.model, "--ref", f.ref, "--rollouts", f.rollouts, "--entropy-coef", "0.01"}, "flag provided but not defined: -entropy-coef"},
	}
	if !model.CUDAAvailable() {
		cases = append(cases, struct {
			name string
			args []string
			want string
		}{"no cuda", []string{"--model", f.model, "--ref", f.ref, "--rollouts", f.rollouts, "--device", "cuda"}, "--device: device cuda: not usable here"})
	}
	for _, c := range cases {
		_, err := runUpdateCmd(t, append(c.args, "--out", out)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line with %q", c.name, err, c.want)
		}
		if _, serr := os.Stat(out); serr == nil {
			t.Fatalf("%s: --out written by a failed update", c.name)
		}
	}
	// An optimizer state of another model is a mismatched checkpoint.
	done := filepath.Join(f.root, "done")
	if msg, err := runUpdateCmd(t, "--model", f.model, "--ref", f.ref, "--rollouts", f.rollouts, "--out", done, "--kl-coef", "0"); err != nil {
		t.Fatal(msg, err)
	}
	_, err := runUpdateCmd(t, "--model", other, "--optimizer", filepath.Join(done, update.OptimizerFile), "--rollouts", f.rollouts, "--out", out, "--kl-coef", "0")
	if err == nil || !strings.Contains(err.Error(), "mismatched checkpoint") {
		t.Errorf("foreign optimizer state: %v", err)
	}
	before, _ := os.ReadFile(filepath.Join(done, "model.safetensors"))
	// A failing update onto an existing --out leaves it whole.
	if _, err := runUpdateCmd(t, "--model", f.model, "--rollouts", badIDs, "--out", done, "--kl-coef", "0"); err == nil {
		t.Fatal("bad ids accepted")
	}
	after, _ := os.ReadFile(filepath.Join(done, "model.safetensors"))
	if !bytes.Equal(before, after) {
		t.Error("failed update changed an existing --out")
	}
}

func TestSFTCommand(t *testing.T) {
	f := newUpdFixture(t)
	out := filepath.Join(f.root, "sft")
	metrics := filepath.Join(f.root, "sft.jsonl")
	msg, err := runUpdateCmd(t, "sft", "--model", f.model, "--data", f.rollouts, "--out", out, "--metrics", metrics,
		"--epochs", "8", "--lr", "1e-2", "--batch-size", "0")
	if err != nil {
		t.Fatal(msg, err)
	}
	rows, err := records.ReadFile[records.Update](metrics)
	if err != nil || len(rows) != 8 {
		t.Fatalf("%d rows: %v", len(rows), err)
	}
	if !(rows[7].Loss < rows[0].Loss-0.1) {
		t.Errorf("SFT cross-entropy %v → %v", rows[0].Loss, rows[7].Loss)
	}
	if rows[0].Tokens == 0 || rows[0].Loss <= 0 {
		t.Errorf("row %+v", rows[0])
	}
	if _, err := model.Load(out, nil); err != nil {
		t.Fatal(err)
	}
}

// apply refuses shard sets that do not make one step: a missing or repeated
// shard, shards of different runs, or a model that is not the one the
// gradients were computed on; nothing is written.
func TestApplyRefusesBadShards(t *testing.T) {
	f := newUpdFixture(t)
	g := func(name, shard string, extra ...string) string {
		p := filepath.Join(f.root, name)
		a := append([]string{"grad", "--model", f.model, "--rollouts", f.rollouts, "--kl-coef", "0", "--out", p, "--shard", shard}, extra...)
		if msg, err := runUpdateCmd(t, a...); err != nil {
			t.Fatal(msg, err)
		}
		return p
	}
	g0, g1 := g("g0", "0/2"), g("g1", "1/2")
	h1 := g("h1", "1/2", "--alpha", "0.5")
	out := filepath.Join(f.root, "out")
	cases := []struct {
		grads []string
		want  string
	}{
		{[]string{g0}, "but 1 gradient files were given"},
		{[]string{g0, g0}, "given twice"},
		{[]string{g0, h1}, "from another step or run"},
	}
	for _, c := range cases {
		var args []string
		for _, p := range c.grads {
			args = append(args, "--grads", p)
		}
		_, err := runUpdateCmd(t, append([]string{"apply", "--model", f.model, "--out", out}, args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.grads, err, c.want)
		}
	}
	// Applied once, the same gradients do not fit the resulting model.
	done := filepath.Join(f.root, "done")
	if msg, err := runUpdateCmd(t, "apply", "--model", f.model, "--grads", g0, "--grads", g1, "--out", done); err != nil {
		t.Fatal(msg, err)
	}
	if _, err := runUpdateCmd(t, "apply", "--model", done, "--grads", g0, "--grads", g1, "--out", out); err == nil || !strings.Contains(err.Error(), "has taken 1 optimizer steps") {
		t.Errorf("gradients applied to the wrong model: %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused apply wrote --out")
	}
	if _, err := runUpdateCmd(t, "grad", "--model", f.model, "--rollouts", f.rollouts, "--kl-coef", "0", "--out", g0, "--shard", "2/2"); err == nil {
		t.Error("--shard 2/2 accepted")
	}
}
