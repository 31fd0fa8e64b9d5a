package update

import (
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/rl"
)

func rlOpts(m *model.Model) PrepareOptions {
	return PrepareOptions{Vocab: m.VocabSize(), RL: true, Adv: rl.DefaultAdvConfig()}
}

func noKL() Config {
	c := DefaultConfig()
	c.Loss.KLCoef = 0
	return c
}

// All-equal rewards give A = 0 everywhere, so with KL off the PG term
// contributes an exactly zero gradient. Single-sample groups likewise.
func TestZeroAdvantageZeroGradient(t *testing.T) {
	m := tinyModel(t, 1)
	one := 1.0
	cases := map[string]synth{
		"all-equal":     {tasks: 2, G: 3, steps: 2, rt: func(int, int) float64 { return 1 }, rm: func(int, int, int) *float64 { return &one }, seed: 1},
		"single-sample": {tasks: 3, G: 1, steps: 2, rt: func(task, _ int) float64 { return float64(task) }, seed: 2},
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := Prepare(s.rollouts(t, m), rlOpts(m))
			if err != nil {
				t.Fatal(err)
			}
			tr, _ := NewTrainer(m, b, noKL())
			res, err := tr.ShardGrad(allTrajs(b), allTrajs(b))
			if err != nil {
				t.Fatal(err)
			}
			for n, g := range res.Grads {
				if maxAbs(g) != 0 {
					t.Fatalf("%s: gradient %v, want exactly 0", n, maxAbs(g))
				}
			}
			if res.Metrics.Tokens != b.Tokens {
				t.Errorf("loss tokens %d, want %d", res.Metrics.Tokens, b.Tokens)
			}
		})
	}
}

// Hand-computed advantages reach the model: one task, two rollouts with
// R^T 1 and 0 and memory rewards {0.5, −0.1 | 0.2, undefined}. At ratio 1
// and no KL the loss is −Σ_i 1/(n_i·2) Σ_k A_{i,k}·logp, so the gradient
// must equal model.Backward with those weights.
func TestAdvantagesReachTheModel(t *testing.T) {
	m := tinyModel(t, 2)
	rms := [][]*float64{{records.Ptr(0.5), records.Ptr(-0.1)}, {records.Ptr(0.2), nil}}
	s := synth{tasks: 1, G: 2, steps: 2, rt: func(_, g int) float64 { return float64(1 - g) },
		rm: func(_, g, st int) *float64 { return rms[g][st] }, seed: 5}
	rolls := s.rollouts(t, m)
	b, err := Prepare(rolls, rlOpts(m))
	if err != nil {
		t.Fatal(err)
	}
	// By hand: A^T = ±0.5/(√0.5 + 1e-6). R^M pool {0.5, −0.1, 0.2}: mean
	// 0.2, unbiased std 0.3, so A^M = {1, −1, 0}/(1 + 1e-6/0.3)·… exactly
	// (x − 0.2)/(0.3 + 1e-6).
	aT := []float64{0.5 / (math.Sqrt(0.5) + 1e-6), -0.5 / (math.Sqrt(0.5) + 1e-6)}
	aM := [][]float64{{0.3 / (0.3 + 1e-6), -0.3 / (0.3 + 1e-6)}, {0, 0}}
	var seqs [][]int
	var ws [][]float32
	for i, ro := range rolls {
		n := 0
		for _, st := range ro.Steps {
			n += len(st.OutputIDs)
		}
		for k, st := range ro.Steps {
			seq := make([]int, 0)
			w := make([]float32, 0)
			for _, x := range st.ContextIDs {
				seq = append(seq, int(x))
				w = append(w, 0)
			}
			for q, x := range st.OutputIDs {
				a := aT[i]
				if q < 2 {
					a += aM[i][k]
				}
				seq = append(seq, int(x))
				w = append(w, float32(a/(float64(n)*2)))
			}
			seqs, ws = append(seqs, seq), append(ws, w)
		}
	}
	// Log-probs equal to the model's: ratio exactly 1.
	tr, _ := NewTrainer(m, b, noKL())
	res, err := tr.ShardGrad(allTrajs(b), allTrajs(b))
	if err != nil {
		t.Fatal(err)
	}
	m.ZeroGrads()
	if _, _, err := m.Backward(seqs, ws); err != nil {
		t.Fatal(err)
	}
	want := m.Grads()
	m.ZeroGrads()
	for name, g := range want {
		scale := maxAbs(g)
		if scale == 0 {
			t.Fatalf("%s: hand-made gradient is zero", name)
		}
		for i := range g {
			if d := math.Abs(float64(g[i] - res.Grads[name][i])); d > 1e-4*scale {
				t.Fatalf("%s[%d]: gradient %v, hand-computed %v", name, i, res.Grads[name][i], g[i])
			}
		}
	}
	// The block with the largest R^M (0.5) carries the largest advantage.
	best, bestA := -1, math.Inf(-1)
	for k, sm := range b.Samples {
		if sm.Adv[0] > float32(bestA) {
			best, bestA = k, float64(sm.Adv[0])
		}
	}
	if b.Samples[best].Traj != 0 || b.Samples[best].Step != 0 {
		t.Errorf("largest <mem> advantage on trajectory %d step %d, want the R^M = 0.5 block (0, 0)", b.Samples[best].Traj, b.Samples[best].Step)
	}
	if sm := b.Samples[best]; !(sm.Adv[0] > sm.Adv[2]) {
		t.Errorf("<mem> tokens %v not above the other tokens %v", sm.Adv[0], sm.Adv[2])
	}
}

func TestNonFiniteGuards(t *testing.T) {
	m := tinyModel(t, 3)
	s := synth{tasks: 1, G: 2, steps: 1, rt: func(_, g int) float64 { return float64(g) }, seed: 9}
	rolls := s.rollouts(t, m)
	rolls[1].RewardTask = math.NaN()
	if _, err := Prepare(rolls, rlOpts(m)); err == nil {
		t.Error("NaN trajectory reward accepted")
	}
	rolls = s.rollouts(t, m)
	rolls[0].Steps[0].RMem = records.Ptr(math.Inf(1))
	if _, err := Prepare(rolls, rlOpts(m)); err == nil {
		t.Error("infinite memory reward accepted")
	}
	rolls = s.rollouts(t, m)
	rolls[0].Steps[0].Logprobs[1] = float32(math.NaN())
	var ie *InputError
	if _, err := Prepare(rolls, rlOpts(m)); !errors.As(err, &ie) || ie.Field != "steps[0].logprobs" {
		t.Errorf("NaN log-prob: %v", err)
	}
	// A non-finite gradient stops the step and leaves the model alone.
	b, err := Prepare(s.rollouts(t, m), rlOpts(m))
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := NewTrainer(m, b, noKL())
	res, err := tr.ShardGrad(allTrajs(b), allTrajs(b))
	if err != nil {
		t.Fatal(err)
	}
	name := m.ParamNames()[1]
	before := m.Param(name)
	res.Grads[name][0] = float32(math.Inf(1))
	if _, err := tr.Apply(res); err == nil {
		t.Fatal("infinite gradient applied")
	}
	if after := m.Param(name); after[0] != before[0] || tr.Opt.StepCount() != 0 {
		t.Error("model or optimizer changed by a refused step")
	}
}

func TestBadInputs(t *testing.T) {
	m := tinyModel(t, 4)
	s := synth{tasks: 1, G: 2, steps: 2, rt: func(_, g int) float64 { return float64(g) }, seed: 11}
	rolls := s.rollouts(t, m)
	rolls[1].Steps[1].ContextIDs[2] = 24
	var ie *InputError
	_, err := Prepare(rolls, rlOpts(m))
	if !errors.As(err, &ie) || ie.Traj != 1 || ie.Field != "steps[1].context_ids" {
		t.Errorf("context id beyond vocab: %v", err)
	}
	if _, err := Prepare(nil, rlOpts(m)); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty rollouts: %v", err)
	}
	rolls = s.rollouts(t, m)
	for i := range rolls {
		for k := range rolls[i].Steps {
			rolls[i].Steps[k].OutputIDs, rolls[i].Steps[k].Logprobs = nil, nil
		}
	}
	if _, err := Prepare(rolls, rlOpts(m)); !errors.Is(err, ErrEmpty) {
		t.Errorf("rollouts without output ids: %v", err)
	}
	rolls = s.rollouts(t, m)
	rolls[0].Steps[0].ContextIDs = nil
	if _, err := Prepare(rolls, rlOpts(m)); !errors.As(err, &ie) || ie.Field != "steps[0].context_ids" {
		t.Errorf("empty context: %v", err)
	}
	cfg := noKL()
	cfg.Loss.EntropyCoef = 0.01
	if _, err := NewTrainer(m, nil, cfg); err == nil {
		t.Error("entropy bonus accepted without an entropy gradient")
	}
}

// The gradient of the total loss (clipped ratio + β·k3 KL, trajectory
// aggregation) matches central finite differences of the loss itself.
func TestFiniteDifferenceGradient(t *testing.T) {
	m := tinyModel(t, 5)
	ref := func() *model.Model {
		cfg := tinyConfig()
		r, err := model.New(cfg, tinyTensors(cfg, 55), nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}()
	rm := func(_, g, st int) *float64 { return records.Ptr(0.1*float64(g) - 0.05*float64(st)) }
	s := synth{tasks: 2, G: 3, steps: 2, rt: func(task, g int) float64 { return float64((task + g) % 2) }, rm: rm, noise: 0.05, seed: 13}
	b, err := Prepare(s.rollouts(t, m), rlOpts(m))
	if err != nil {
		t.Fatal(err)
	}
	if err := RefLogProbs(ref, b, nil, 0); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Loss.KLCoef = 0.1
	cfg.Loss.ClipLow, cfg.Loss.ClipHigh = 0.5, 0.5 // ratios stay inside: the loss is smooth here
	tr, err := NewTrainer(m, b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	all := allTrajs(b)
	res, err := tr.ShardGrad(all, all)
	if err != nil {
		t.Fatal(err)
	}
	loss := func() float64 {
		met, err := tr.Evaluate(all)
		if err != nil {
			t.Fatal(err)
		}
		return met.Loss
	}
	checks := []struct {
		name string
		i    int
	}{{"model.embed_tokens.weight", 37}, {"model.layers.0.self_attn.q_proj.weight", 5}, {"model.layers.1.mlp.down_proj.weight", 11},
		{"model.layers.1.input_layernorm.weight", 3}, {"model.layers.0.self_attn.v_proj.bias", 2}}
	// Central differences at h and h/2, combined by Richardson extrapolation
	// (error O(h⁴)): the network is strongly nonlinear at these weights.
	const h = 2e-2
	for _, c := range checks {
		p := m.Param(c.name)
		x := p[c.i]
		central := func(h float64) float64 {
			p[c.i] = x + float32(h)
			m.SetParam(c.name, p)
			lp := loss()
			p[c.i] = x - float32(h)
			m.SetParam(c.name, p)
			lm := loss()
			p[c.i] = x
			m.SetParam(c.name, p)
			return (lp - lm) / (float64(x+float32(h)) - float64(x-float32(h)))
		}
		fd := (4*central(h/2) - central(h)) / 3
		g := float64(res.Grads[c.name][c.i])
		t.Logf("%s[%d]: gradient %.6g, finite difference %.6g", c.name, c.i, g, fd)
		if math.Abs(fd-g) > 3e-3*math.Max(math.Abs(fd), 1e-2) {
			t.Errorf("%s[%d]: gradient %.6g, finite difference %.6g", c.name, c.i, g, fd)
		}
	}
}

// Several epochs on one batch: the first step is on-policy (ratio 1, no
// clipping), the loss falls, and the clipped fraction grows as the policy
// moves away from the rollout's.
func TestUpdateLowersLossAndClips(t *testing.T) {
	m := tinyModel(t, 6)
	rm := func(_, g, st int) *float64 { return records.Ptr(0.2*float64(g%3) - 0.1*float64(st)) }
	s := synth{tasks: 2, G: 4, steps: 2, rt: func(task, g int) float64 { return float64((g + task) % 2) }, rm: rm, seed: 17}
	b, err := Prepare(s.rollouts(t, m), rlOpts(m))
	if err != nil {
		t.Fatal(err)
	}
	cfg := noKL()
	cfg.Schedule.PeakLR = 3e-3
	cfg.MaxGradNorm = 0
	tr, _ := NewTrainer(m, b, cfg)
	all := allTrajs(b)
	start, err := tr.Evaluate(all)
	if err != nil {
		t.Fatal(err)
	}
	plan := Plan{NTraj: len(b.Trajs), Epochs: 6, Seed: 1}
	var rows []records.Update
	for k := 0; k < plan.Steps(); k++ {
		res, err := tr.Step(plan, k, 1)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, res.Row)
		if k == 0 {
			// One step on the whole batch already lowers its loss.
			if after, _ := tr.Evaluate(all); !(after.Loss < start.Loss) {
				t.Errorf("loss %v after one step, %v before", after.Loss, start.Loss)
			}
		}
	}
	end, _ := tr.Evaluate(all)
	// On-policy the drift is only float rounding: the rollout's log-probs
	// came from one sequence at a time, the update packs several.
	if rows[0].PGClipfrac != 0 || rows[0].LogprobDriftMax > 1e-4 {
		t.Errorf("first step: clipfrac %v drift %v, want 0 on-policy", rows[0].PGClipfrac, rows[0].LogprobDriftMax)
	}
	if math.Abs(rows[0].Loss-start.Loss) > 1e-6 {
		t.Errorf("first row loss %v, evaluated %v", rows[0].Loss, start.Loss)
	}
	if !(end.Loss < start.Loss-1e-3) {
		t.Errorf("loss %v → %v: did not fall", start.Loss, end.Loss)
	}
	if !(rows[len(rows)-1].PGClipfrac > 0.05) {
		t.Errorf("clip fractions %v: no clipping after %d epochs", clipfracs(rows), plan.Epochs)
	}
	// No KL coefficient and no entropy metric: those are null, not 0; the
	// memory reward was computed and is there; verl's ppo_kl is the mean
	// old − new log-prob, 0 on-policy up to rounding and nonzero once the
	// policy moved.
	last := rows[len(rows)-1]
	if last.KL != nil || last.Entropy != nil || last.RewardMemMean == nil || last.AdvMemStd == nil {
		t.Errorf("nullable metrics: kl %v entropy %v reward_mem %v adv_mem_std %v", last.KL, last.Entropy, last.RewardMemMean, last.AdvMemStd)
	}
	if math.Abs(rows[0].PPOKL) > 1e-5 || math.Abs(last.PPOKL) < 1e-4 || last.PGClipfracLower < 0 || last.PGClipfracLower > 1 {
		t.Errorf("ppo_kl %v → %v, pg_clipfrac_lower %v", rows[0].PPOKL, last.PPOKL, last.PGClipfracLower)
	}
	if !(last.LogprobDriftMean > 0) || last.Step != int64(plan.Steps()) || rows[1].LR != 3e-3 {
		t.Errorf("last row %+v", rows[len(rows)-1])
	}
	t.Logf("loss %.4f → %.4f, clip fractions %v", start.Loss, end.Loss, clipfracs(rows))
}

func clipfracs(rows []records.Update) []float64 {
	var out []float64
	for _, r := range rows {
		out = append(out, r.PGClipfrac)
	}
	return out
}

func TestKLZeroForIdenticalModels(t *testing.T) {
	m := tinyModel(t, 7)
	s := synth{tasks: 1, G: 3, steps: 2, rt: func(_, g int) float64 { return float64(g) }, noise: 0.1, seed: 19}
	b, err := Prepare(s.rollouts(t, m), rlOpts(m))
	if err != nil {
		t.Fatal(err)
	}
	if err := RefLogProbs(tinyModel(t, 7), b, nil, 0); err != nil {
		t.Fatal(err)
	}
	for _, kl := range []rl.KLType{rl.KLLowVar, rl.KLK1, rl.KLK2} {
		cfg := DefaultConfig()
		cfg.Loss.KL, cfg.Loss.KLCoef = kl, 0.5
		tr, _ := NewTrainer(m, b, cfg)
		met, err := tr.Evaluate(allTrajs(b))
		if err != nil {
			t.Fatal(err)
		}
		if met.KL != 0 {
			t.Errorf("%v: KL %v for identical models", kl, met.KL)
		}
	}
	// A different reference gives a positive k3 KL.
	if err := RefLogProbs(tinyModel(t, 8), b, nil, 0); err != nil {
		t.Fatal(err)
	}
	tr, _ := NewTrainer(m, b, DefaultConfig())
	if met, _ := tr.Evaluate(allTrajs(b)); !(met.KL > 0) {
		t.Errorf("KL %v to a different model", met.KL)
	}
}

// Three shards summed equal the unsplit gradient to float32 rounding: not
// bit for bit, because the shards pack different sequences into each
// forward (different matrix shapes for BLAS) and sum in another order.
// Measured: 4e-5 of the largest entry. (With the same shard count, grad +
// apply is bit-identical to the single process: cmd/mempo-update tests.)
func TestShardsSumToWhole(t *testing.T) {
	m := tinyModel(t, 9)
	s := synth{tasks: 2, G: 3, steps: 2, rt: func(task, g int) float64 { return float64((task * g) % 2) }, noise: 0.05, seed: 23,
		rm: func(_, g, st int) *float64 { return records.Ptr(float64(g+st) / 10) }}
	b, err := Prepare(s.rollouts(t, m), rlOpts(m))
	if err != nil {
		t.Fatal(err)
	}
	for _, agg := range []rl.AggMode{rl.AggTrajectory, rl.AggTokenMean, rl.AggSeqMeanTokenSum} {
		cfg := noKL()
		cfg.Loss.Agg = agg
		tr, _ := NewTrainer(m, b, cfg)
		all := allTrajs(b)
		whole, err := tr.ShardGrad(all, all)
		if err != nil {
			t.Fatal(err)
		}
		sum, _ := tr.ShardGrad(all, Shard(all, 0, 3))
		for i := 1; i < 3; i++ {
			r, _ := tr.ShardGrad(all, Shard(all, i, 3))
			if err := sum.Add(r); err != nil {
				t.Fatal(err)
			}
		}
		for name, g := range whole.Grads {
			sc := maxAbs(g)
			for i := range g {
				if d := math.Abs(float64(g[i] - sum.Grads[name][i])); d > 2e-4*sc {
					t.Fatalf("%v %s[%d]: whole %v, shards %v", agg, name, i, g[i], sum.Grads[name][i])
				}
			}
		}
		if math.Abs(whole.Metrics.Loss-sum.Metrics.Loss) > 1e-6 || whole.Metrics.Tokens != sum.Metrics.Tokens {
			t.Errorf("%v: loss %v vs %v", agg, whole.Metrics.Loss, sum.Metrics.Loss)
		}
	}
}

func TestSFT(t *testing.T) {
	m := tinyModel(t, 10)
	s := synth{tasks: 2, G: 2, steps: 2, seed: 29}
	b, err := Prepare(s.rollouts(t, m), PrepareOptions{Vocab: m.VocabSize()})
	if err != nil {
		t.Fatal(err)
	}
	sm := &b.Samples[0]
	w := sftWeights(sm, 0.5)
	for p, x := range w {
		if (p < sm.Ctx) != (x == 0) {
			t.Fatalf("weight %v at position %d (context %d): context tokens must carry no loss", x, p, sm.Ctx)
		}
	}
	cfg := noKL()
	cfg.Schedule.PeakLR = 1e-2
	tr, _ := NewTrainer(m, b, cfg)
	tr.SFT = true
	all := allTrajs(b)
	ce0, _ := tr.SFTLoss(all)
	// The loss the SFT step reports is the output-only mean cross-entropy.
	g, err := tr.SFTShardGrad(all, all)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(g.Metrics.Loss-ce0) > 1e-5 || g.Metrics.Tokens != b.Tokens {
		t.Errorf("SFT loss %v over %d tokens, mean output cross-entropy %v over %d", g.Metrics.Loss, g.Metrics.Tokens, ce0, b.Tokens)
	}
	plan := Plan{NTraj: len(b.Trajs), MiniBatch: 2, Epochs: 5, Seed: 3}
	for k := 0; k < plan.Steps(); k++ {
		if _, err := tr.Step(plan, k, 1); err != nil {
			t.Fatal(err)
		}
	}
	ce1, _ := tr.SFTLoss(all)
	if !(ce1 < ce0-0.05) {
		t.Errorf("SFT cross-entropy %v → %v: did not fall", ce0, ce1)
	}
}

// The written checkpoint reopens with checkpoint.Open and gives the
// in-memory model's logits exactly; the optimizer state round-trips.
func TestCheckpointRoundTrip(t *testing.T) {
	m := tinyModel(t, 11)
	s := synth{tasks: 1, G: 2, steps: 1, rt: func(_, g int) float64 { return float64(g) }, seed: 31}
	b, _ := Prepare(s.rollouts(t, m), rlOpts(m))
	cfg := noKL()
	cfg.Schedule.PeakLR = 1e-3
	tr, _ := NewTrainer(m, b, cfg)
	if _, err := tr.Step(Plan{NTraj: 2, Epochs: 1}, 0, 1); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "ckpt")
	rs := RunState{GlobalStep: 1, Seed: 4, PlanStep: 1, PlanSteps: 1, Fingerprint: "abc", Schedule: cfg.Schedule, AdamW: cfg.AdamW}
	if err := SaveCheckpoint(dir, m, "", tr.Opt.State(), rs, []records.Update{{Step: 1}}); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck.Close()
	m2, err := model.Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	seqs := [][]int{b.Samples[0].IDs, b.Samples[1].IDs}
	l1, _ := m.Logits(seqs)
	l2, _ := m2.Logits(seqs)
	for k := range l1 {
		for i := range l1[k] {
			if l1[k][i] != l2[k][i] {
				t.Fatalf("logit %d of sequence %d: %v in memory, %v reopened", i, k, l1[k][i], l2[k][i])
			}
		}
	}
	st, rs2, err := ReadOptimizer(filepath.Join(dir, OptimizerFile))
	if err != nil {
		t.Fatal(err)
	}
	if rs2 != rs {
		t.Errorf("run state %+v, wrote %+v", rs2, rs)
	}
	want := tr.Opt.State()
	for name, v := range want.ExpAvgSq {
		if st.Steps[name] != 1 || len(st.ExpAvgSq[name]) != len(v) || st.ExpAvgSq[name][0] != v[0] || st.ExpAvg[name][len(v)-1] != want.ExpAvg[name][len(v)-1] {
			t.Fatalf("optimizer state of %s did not round-trip", name)
		}
	}
	if err := CheckState("x", st, tinyModelOther(t)); err == nil {
		t.Error("optimizer state of another architecture accepted")
	}
}

func tinyModelOther(t *testing.T) *model.Model {
	cfg := tinyConfig()
	cfg.HiddenSize, cfg.HeadDim = 32, 16
	m, err := model.New(cfg, tinyTensors(cfg, 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPlan(t *testing.T) {
	p := Plan{NTraj: 10, MiniBatch: 4, Epochs: 2, Seed: 5}
	if p.Steps() != 6 {
		t.Fatalf("steps %d", p.Steps())
	}
	for e := 0; e < 2; e++ {
		seen := map[int]bool{}
		for j := 0; j < 3; j++ {
			ep, tr := p.At(e*3 + j)
			if ep != e {
				t.Fatalf("step %d epoch %d", e*3+j, ep)
			}
			for _, i := range tr {
				seen[i] = true
			}
		}
		if len(seen) != 10 {
			t.Errorf("epoch %d covers %d trajectories", e, len(seen))
		}
	}
	_, a := p.At(0)
	_, c := p.At(3)
	if len(a) != 4 || a[0] == c[0] && a[1] == c[1] && a[2] == c[2] {
		t.Errorf("epochs not reshuffled: %v %v", a, c)
	}
	if got := Shard([]int{1, 2, 3, 4, 5}, 1, 2); len(got) != 3 || got[0] != 3 {
		t.Errorf("shard %v", got)
	}
}

// Knobs reach the token advantages: without the memory advantage (plain
// GRPO) every output token of a trajectory gets A^T; with α = 2 the <mem>
// tokens get A^T + 2·A^M; with the step pool, A^M is a z-score per step index.
func TestAdvantageKnobs(t *testing.T) {
	m := tinyModel(t, 12)
	rms := [][]*float64{{records.Ptr(0.5), records.Ptr(-0.1)}, {records.Ptr(0.2), records.Ptr(0.3)}}
	s := synth{tasks: 1, G: 2, steps: 2, rt: func(_, g int) float64 { return float64(1 - g) },
		rm: func(_, g, st int) *float64 { return rms[g][st] }, seed: 41}
	rolls := s.rollouts(t, m)
	base := rl.DefaultAdvConfig()
	aT := 0.5 / (math.Sqrt(0.5) + 1e-6)

	off := base
	off.MemAdv = false
	b, err := Prepare(rolls, PrepareOptions{Vocab: m.VocabSize(), RL: true, Adv: off})
	if err != nil {
		t.Fatal(err)
	}
	for _, sm := range b.Samples {
		want := float32(aT)
		if sm.Traj == 1 {
			want = -want
		}
		for _, a := range sm.Adv {
			if a != want {
				t.Fatalf("plain GRPO: trajectory %d token advantage %v, want A^T %v", sm.Traj, a, want)
			}
		}
	}

	two := base
	two.Alpha = 2
	two.MemPool = rl.PoolStep
	b, err = Prepare(rolls, PrepareOptions{Vocab: m.VocabSize(), RL: true, Adv: two})
	if err != nil {
		t.Fatal(err)
	}
	// Step pools of two values: ±0.15/(unbiased std 0.2121 + 1e-6) at
	// step 0 ({0.5, 0.2}) and ∓0.2/(0.2828 + 1e-6) at step 1 ({−0.1, 0.3}).
	zs := []float64{0.15 / (math.Sqrt(0.045) + 1e-6), 0.2 / (math.Sqrt(0.08) + 1e-6)}
	for _, sm := range b.Samples {
		z := zs[sm.Step]
		aM := z
		if (sm.Traj == 1) != (sm.Step == 1) {
			aM = -z
		}
		sign := 1.0
		if sm.Traj == 1 {
			sign = -1
		}
		want := float32(sign*aT + 2*aM)
		if math.Abs(float64(sm.Adv[0]-want)) > 1e-6 || math.Abs(float64(sm.Adv[2])-sign*aT) > 1e-6 {
			t.Errorf("trajectory %d step %d: <mem> %v other %v, want %v and %v", sm.Traj, sm.Step, sm.Adv[0], sm.Adv[2], want, sign*aT)
		}
	}
}

// TestMemSkipRepeats: with the knob, a step whose output repeats the step
// before's gets A^M = 0 (its <mem> tokens only A^T) and its R^M leaves the
// task's pool; without it, the same step is scored as any other.
func TestMemSkipRepeats(t *testing.T) {
	m := tinyModel(t, 12)
	rms := [][]*float64{{records.Ptr(0.5), records.Ptr(-0.1)}, {records.Ptr(0.2), records.Ptr(0.3)}}
	s := synth{tasks: 1, G: 2, steps: 2, rt: func(_, g int) float64 { return float64(1 - g) },
		rm: func(_, g, st int) *float64 { return rms[g][st] }, seed: 41}
	rolls := s.rollouts(t, m)
	// Trajectory 0's second step says what its first said.
	s0, s1 := &rolls[0].Steps[0], &rolls[0].Steps[1]
	s1.OutputIDs, s1.Logprobs, s1.MemEnd = slices.Clone(s0.OutputIDs), slices.Clone(s0.Logprobs), s0.MemEnd
	aT := 0.5 / (math.Sqrt(0.5) + 1e-6)
	memAdv := func(cfg rl.AdvConfig) map[[2]int]float64 {
		b, err := Prepare(rolls, PrepareOptions{Vocab: m.VocabSize(), RL: true, Adv: cfg})
		if err != nil {
			t.Fatal(err)
		}
		out := map[[2]int]float64{}
		for _, sm := range b.Samples {
			sign := 1.0
			if sm.Traj == 1 {
				sign = -1
			}
			out[[2]int{sm.Traj, sm.Step}] = float64(sm.Adv[0]) - sign*aT
		}
		return out
	}
	// The pool without the repeat: {0.5, 0.2, 0.3}, mean 1/3, unbiased std.
	mean := 1.0 / 3
	sd := math.Sqrt((math.Pow(0.5-mean, 2) + math.Pow(0.2-mean, 2) + math.Pow(0.3-mean, 2)) / 2)
	skip := rl.DefaultAdvConfig()
	skip.MemSkipRepeats = true
	got := memAdv(skip)
	for k, want := range map[[2]int]float64{{0, 0}: (0.5 - mean) / (sd + 1e-6), {0, 1}: 0, {1, 0}: (0.2 - mean) / (sd + 1e-6), {1, 1}: (0.3 - mean) / (sd + 1e-6)} {
		if math.Abs(got[k]-want) > 1e-5 {
			t.Errorf("--mem-skip-repeats: trajectory %d step %d A^M %v, want %v", k[0], k[1], got[k], want)
		}
	}
	if a := memAdv(rl.DefaultAdvConfig())[[2]int{0, 1}]; math.Abs(a) < 0.5 {
		t.Errorf("without the knob the repeated step's A^M is %v, want the z-score of its R^M −0.1", a)
	}
}

// TestStepMemRewards: the memory rewards the advantage stage pools, worked
// by hand. Under the paper's baseline they are the stored R^M; under
// rl.BaselinePrevMemory the first step keeps its R^M (its history is the
// prompt alone) and every later one is P(gold | mem_t) − P(gold | mem_t−1),
// so a repeated memory scores exactly 0; a step without the terms, or after
// one, is undefined; --mem-skip-repeats leaves the repeat out under both.
func TestStepMemRewards(t *testing.T) {
	p := records.Ptr
	step := func(out []int32, pm, ph *float64) records.Step {
		st := records.Step{OutputIDs: out, PGoldMem: pm, PGoldHist: ph}
		if pm != nil {
			st.RMem = p(*pm - *ph)
		}
		return st
	}
	r := records.Rollout{Steps: []records.Step{
		step([]int32{1}, p(0.25), p(0.125)), // R^M 0.125
		step([]int32{2}, p(0.5), p(0.75)),   // R^M −0.25, gain 0.25
		step([]int32{2}, p(0.5), p(0.875)),  // a repeat: R^M −0.375, gain 0
		step([]int32{3}, nil, nil),          // no memory terms
		step([]int32{4}, p(1), p(0.5)),      // R^M 0.5; the step before has no P(gold | mem); the answer
	}}
	r.Steps[4].Action = "answer"
	nan := math.NaN()
	for _, c := range []struct {
		name string
		cfg  func(*rl.AdvConfig)
		want []float64
	}{
		{"history", func(*rl.AdvConfig) {}, []float64{0.125, -0.25, -0.375, nan, 0.5}},
		{"previous", func(c *rl.AdvConfig) { c.MemBaseline = rl.BaselinePrevMemory }, []float64{0.125, 0.25, 0, nan, nan}},
		{"history, skip repeats", func(c *rl.AdvConfig) { c.MemSkipRepeats = true }, []float64{0.125, -0.25, nan, nan, 0.5}},
		{"previous, skip repeats", func(c *rl.AdvConfig) { c.MemBaseline, c.MemSkipRepeats = rl.BaselinePrevMemory, true }, []float64{0.125, 0.25, nan, nan, nan}},
		{"history, skip the answer", func(c *rl.AdvConfig) { c.MemSkipAnswer = true }, []float64{0.125, -0.25, -0.375, nan, nan}},
	} {
		cfg := rl.DefaultAdvConfig()
		c.cfg(&cfg)
		got := StepMemRewards(&r, cfg)
		for i := range c.want {
			if !(got[i] == c.want[i] || math.IsNaN(got[i]) && math.IsNaN(c.want[i])) {
				t.Errorf("%s: step %d R^M %v, want %v", c.name, i, got[i], c.want[i])
			}
		}
	}
}

// TestStepMemRewardsPerObjective: the per-objective terms follow the same
// baseline and the same undefined steps as the pooled R^M (by hand).
func TestStepMemRewardsPerObjective(t *testing.T) {
	p := records.Ptr
	r := records.Rollout{Steps: []records.Step{
		{PGoldMem: p(0.5), PGoldHist: p(0.25), RMem: p(0.25), PGoldMemObj: []float64{0.75, 0.25}, PGoldHistObj: []float64{0.25, 0.25}},
		{PGoldMem: p(0.625), PGoldHist: p(0.5), RMem: p(0.125), PGoldMemObj: []float64{0.5, 0.75}, PGoldHistObj: []float64{0.25, 0.75}},
		{PGoldMem: p(0.5), PGoldHist: p(0.5), RMem: p(0)}, // scored jointly: no terms per objective
		{Action: "answer", PGoldMem: p(1), PGoldHist: p(0.5), RMem: p(0.5), PGoldMemObj: []float64{1, 1}, PGoldHistObj: []float64{0.5, 0.5}},
	}}
	for _, c := range []struct {
		name string
		cfg  func(*rl.AdvConfig)
		want [][]float64
	}{
		{"history", func(*rl.AdvConfig) {}, [][]float64{{0.5, 0}, {0.25, 0}, nil, {0.5, 0.5}}},
		{"previous", func(c *rl.AdvConfig) { c.MemBaseline = rl.BaselinePrevMemory }, [][]float64{{0.5, 0}, {-0.25, 0.5}, nil, nil}},
		{"history, skip the answer", func(c *rl.AdvConfig) { c.MemSkipAnswer = true }, [][]float64{{0.5, 0}, {0.25, 0}, nil, nil}},
	} {
		cfg := rl.DefaultAdvConfig()
		c.cfg(&cfg)
		cfg.MemPerObjective = true
		got := TrajRewardOf(&r, cfg).RMObj
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: per-objective R^M %v, want %v", c.name, got, c.want)
		}
	}
	if TrajRewardOf(&r, rl.DefaultAdvConfig()).RMObj != nil {
		t.Error("per-objective terms read without MemPerObjective")
	}
}

// The entropy metric is the mean predictive entropy over the output tokens,
// between 0 and log V, and it does not enter the loss (no bonus).
func TestEntropyMetric(t *testing.T) {
	m := tinyModel(t, 13)
	s := synth{tasks: 1, G: 2, steps: 2, rt: func(_, g int) float64 { return float64(g) }, seed: 43}
	b, err := Prepare(s.rollouts(t, m), rlOpts(m))
	if err != nil {
		t.Fatal(err)
	}
	cfg := noKL()
	tr, _ := NewTrainer(m, b, cfg)
	plain, _ := tr.Evaluate(allTrajs(b))
	cfg.EntropyMetric = true
	tr, _ = NewTrainer(m, b, cfg)
	met, err := tr.Evaluate(allTrajs(b))
	if err != nil {
		t.Fatal(err)
	}
	if !(met.Entropy > 0.1 && met.Entropy < math.Log(24)) || met.Loss != plain.Loss || plain.Entropy != 0 {
		t.Errorf("entropy %v (log V %v), loss %v vs %v without", met.Entropy, math.Log(24), met.Loss, plain.Loss)
	}
	// Uniform logits have entropy log V.
	if h := rowEntropy(make([]float32, 24)); math.Abs(h-math.Log(24)) > 1e-12 {
		t.Errorf("entropy of uniform logits %v", h)
	}
}
