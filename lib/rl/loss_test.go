package rl

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// handBatch is 2 trajectories × 3 steps with ratio 1 (logp = old_logp), so
// every token's policy loss is −A (inside the clip, below the dual clip).
//
//	T0: s0 A = [1, 1]   s1 [2]          s2 [1, 1, 1, (100 masked)]
//	T1: s0 A = [−1]     s1 [−1, −1, −1] s2 [3]
//
// Token losses: T0 [−1 −1][−2][−1 −1 −1] → Σ −7 over 6 tokens;
// T1 [1][1 1 1][−3] → Σ 1 over 5 tokens.
func handBatch() []TrajInput {
	step := func(adv []float32, mask []bool) StepInput {
		lp := make([]float32, len(adv))
		for i := range lp {
			lp[i] = -0.5 - 0.1*float32(i)
		}
		return StepInput{Logp: lp, OldLogp: append([]float32(nil), lp...), Adv: adv, Mask: mask}
	}
	return []TrajInput{
		{ID: "T0", Steps: []StepInput{step([]float32{1, 1}, nil), step([]float32{2}, nil), step([]float32{1, 1, 1, 100}, []bool{true, true, true, false})}},
		{ID: "T1", Steps: []StepInput{step([]float32{-1}, nil), step([]float32{-1, -1, -1}, nil), step([]float32{3}, nil)}},
	}
}

func TestAggregationByHand(t *testing.T) {
	cases := []struct {
		mode AggMode
		loss float64
		// weight of the first token of T0 s0 and of T1 s2
		w0, w1 float64
	}{
		// (−7/6 + 1/5)/2 = −29/60; weights 1/(6·2), 1/(5·2).
		{AggTrajectory, -29.0 / 60, 1.0 / 12, 1.0 / 10},
		// (−7 + 1)/11.
		{AggTokenMean, -6.0 / 11, 1.0 / 11, 1.0 / 11},
		// step sums −2, −2, −3, 1, 3, −3 → −6/6.
		{AggSeqMeanTokenSum, -1, 1.0 / 6, 1.0 / 6},
		// step means −1, −2, −1, 1, 1, −3 → −5/6; T0 s0 has 2 tokens, T1 s2 has 1.
		{AggSeqMeanTokenMean, -5.0 / 6, 1.0 / 12, 1.0 / 6},
	}
	for _, tc := range cases {
		cfg := DefaultLossConfig()
		cfg.KLCoef = 0
		cfg.Agg = tc.mode
		out, err := cfg.Loss(handBatch(), nil)
		if err != nil {
			t.Fatal(err)
		}
		m := out.Metrics
		if !near(m.Loss, tc.loss, 1e-12) || !near(m.PGLoss, tc.loss, 1e-12) {
			t.Errorf("%v: loss %v, want %v", tc.mode, m.Loss, tc.loss)
		}
		if !near(float64(out.Weight[0][0][0]), tc.w0, 1e-7) || !near(float64(out.Weight[1][2][0]), tc.w1, 1e-7) {
			t.Errorf("%v: weights %v %v, want %v %v", tc.mode, out.Weight[0][0][0], out.Weight[1][2][0], tc.w0, tc.w1)
		}
		// Coef = w·(−A·r) with r = 1.
		if !near(float64(out.Coef[0][0][0]), -tc.w0, 1e-7) || !near(float64(out.Coef[1][2][0]), -3*tc.w1, 1e-7) {
			t.Errorf("%v: coefs %v %v", tc.mode, out.Coef[0][0][0], out.Coef[1][2][0])
		}
		if out.Coef[0][2][3] != 0 || out.Weight[0][2][3] != 0 {
			t.Errorf("%v: masked token has coef %v weight %v", tc.mode, out.Coef[0][2][3], out.Weight[0][2][3])
		}
		if m.Tokens != 11 || m.PGClipFrac != 0 || m.PGClipFracLower != 0 || m.PPOKL != 0 {
			t.Errorf("%v: metrics %+v", tc.mode, m)
		}
	}
}

func TestClipFracCounted(t *testing.T) {
	ln := func(x float64) float32 { return float32(math.Log(x)) }
	// Tokens (r, A): (1.5, 1) clipped; (0.5, −1) clipped; (4, −1) dual
	// clipped; (1, 1) neither; (0.5, 1) neither → clipfrac 2/5, lower 1/5.
	// ppo_kl = mean(−Δ) = −(ln1.5 + ln0.5 + ln4 + 0 + ln0.5)/5 = −ln(1.5·0.5·4·0.5)/5
	// = −ln(1.5)/5 = −0.0810930. approx_kl = mean(r − 1 − ln r)
	// = (1.5 + 0.5 + 4 + 1 + 0.5 − 5 − ln(1.5·0.5·4·1·0.5))/5 = (2.5 − ln 1.5)/5
	// = 0.4189070.
	st := StepInput{
		Logp:    []float32{ln(1.5), ln(0.5), ln(4), 0, ln(0.5)},
		OldLogp: []float32{0, 0, 0, 0, 0},
		Adv:     []float32{1, -1, -1, 1, 1},
	}
	cfg := DefaultLossConfig()
	cfg.KLCoef = 0
	out, err := cfg.Loss([]TrajInput{{Steps: []StepInput{st}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := out.Metrics
	if m.PGClipFrac != 0.4 || m.PGClipFracLower != 0.2 || !near(m.PPOKL, -0.0810930, 1e-6) || !near(m.MaxAbsLogRatio, math.Log(4), 1e-6) {
		t.Errorf("clipfrac %v lower %v ppo_kl %v", m.PGClipFrac, m.PGClipFracLower, m.PPOKL)
	}
	if !near(m.ApproxKL, (2.5-math.Log(1.5))/5, 1e-6) {
		t.Errorf("approx_kl %v, want (2.5 − ln 1.5)/5 = %v", m.ApproxKL, (2.5-math.Log(1.5))/5)
	}
}

// randBatch makes trajectories of 3 steps with random log-probs, advantages,
// entropies and masks; ratios spread over every clip branch.
func randBatch(rng *rand.Rand, nTraj int) []TrajInput {
	var b []TrajInput
	for i := 0; i < nTraj; i++ {
		tr := TrajInput{ID: string(rune('a' + i))}
		for s := 0; s < 3; s++ {
			n := 1 + rng.IntN(5)
			st := StepInput{}
			for k := 0; k < n; k++ {
				old := -0.1 - 3*rng.Float64()
				st.OldLogp = append(st.OldLogp, float32(old))
				st.Logp = append(st.Logp, float32(old+0.5*rng.NormFloat64()))
				st.RefLogp = append(st.RefLogp, float32(old+0.3*rng.NormFloat64()))
				st.Adv = append(st.Adv, float32(rng.NormFloat64()))
				st.Entropy = append(st.Entropy, float32(rng.Float64()))
			}
			if rng.IntN(3) == 0 {
				st.Mask = make([]bool, n)
				for k := range st.Mask {
					st.Mask[k] = rng.IntN(4) != 0
				}
			}
			tr.Steps = append(tr.Steps, st)
		}
		b = append(b, tr)
	}
	return b
}

// TestLossGradientFD checks Coef against finite differences of the total
// loss for every aggregation mode and KL estimator.
func TestLossGradientFD(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	batch := randBatch(rng, 3)
	for mode := AggTrajectory; mode <= AggSeqMeanTokenMean; mode++ {
		for _, kl := range []KLType{KLLowVar, KLK1, KLK2} {
			cfg := DefaultLossConfig()
			cfg.Agg, cfg.KL, cfg.KLCoef, cfg.EntropyCoef = mode, kl, 0.5, 0.01
			out, err := cfg.Loss(batch, nil)
			if err != nil {
				t.Fatal(err)
			}
			checked := 0
			for i := range batch {
				for s := range batch[i].Steps {
					st := &batch[i].Steps[s]
					for k := range st.Logp {
						// Coef is checked against the float64 loss with this
						// token's logp moved by ±h (lossAt).
						lp := float64(st.Logp[k])
						eval := func(x float64) float64 { return lossAt(t, cfg, batch, i, s, k, x) }
						h := 1e-4
						fd := (eval(lp+h) - eval(lp-h)) / (2 * h)
						// The central difference straddles a kink when
						// the branch differs at lp±h: skip those.
						a := PPOToken(lp-h, float64(st.OldLogp[k]), float64(st.Adv[k]), 0.2, 0.2, 3)
						c := PPOToken(lp+h, float64(st.OldLogp[k]), float64(st.Adv[k]), 0.2, 0.2, 3)
						if a.Clipped != c.Clipped || a.ClippedLower != c.ClippedLower {
							continue
						}
						if math.Abs(fd-float64(out.Coef[i][s][k])) > 1e-6 {
							t.Errorf("%v/%v traj %d step %d token %d: coef %v, finite difference %v", mode, kl, i, s, k, out.Coef[i][s][k], fd)
						}
						checked++
					}
				}
			}
			if checked < 20 {
				t.Errorf("%v/%v: only %d tokens checked", mode, kl, checked)
			}
		}
	}
}

func cloneBatch(b []TrajInput) []TrajInput {
	c := make([]TrajInput, len(b))
	for i, tr := range b {
		c[i] = tr
		c[i].Steps = append([]StepInput(nil), tr.Steps...)
	}
	return c
}

// lossAt evaluates the total loss with token (i, s, k)'s logp set to x,
// computing that token's terms in float64 (no float32 rounding of x).
func lossAt(t *testing.T, cfg LossConfig, batch []TrajInput, i, s, k int, x float64) float64 {
	t.Helper()
	b := cloneBatch(batch)
	st := b[i].Steps[s]
	lp := append([]float32(nil), st.Logp...)
	lp[k] = 0 // contribution computed below
	st.Logp = lp
	adv := append([]float32(nil), st.Adv...)
	adv[k] = 0
	st.Adv = adv
	b[i].Steps[s] = st
	cfg0 := cfg
	out, err := cfg0.Loss(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Remove token k's contribution with lp = 0, adv = 0 and add it back with x.
	orig := batch[i].Steps[s]
	w := float64(out.Weight[i][s][k])
	if orig.Mask != nil && !orig.Mask[k] {
		return out.Metrics.Loss
	}
	base := out.Metrics.Loss
	kl0, _ := KLToken(cfg.KL, 0, float64(orig.RefLogp[k]))
	base -= w * (cfg.KLCoef * kl0)
	p := PPOToken(x, float64(orig.OldLogp[k]), float64(orig.Adv[k]), cfg.ClipLow, cfg.ClipHigh, cfg.ClipC)
	kl, _ := KLToken(cfg.KL, x, float64(orig.RefLogp[k]))
	return base + w*(p.Loss+cfg.KLCoef*kl)
}

// TestShardsCombine splits a batch into two mini-batches, one of which
// holds only part of a trajectory, and checks that the per-token
// coefficients are bit-identical and the merged metrics equal the unsplit
// batch's.
func TestShardsCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	batch := randBatch(rng, 4)
	den := CountDenoms(batch)
	tokens := func(tr TrajInput) int {
		n := 0
		for _, st := range tr.Steps {
			n += stepTokens(st)
		}
		return n
	}
	split := batch[2]
	a := []TrajInput{batch[0], batch[1], {ID: split.ID, Steps: split.Steps[:1], Tokens: tokens(split)}}
	b := []TrajInput{{ID: split.ID, Steps: split.Steps[1:], Tokens: tokens(split)}, batch[3]}
	for mode := AggTrajectory; mode <= AggSeqMeanTokenMean; mode++ {
		cfg := DefaultLossConfig()
		cfg.Agg, cfg.EntropyCoef = mode, 0.01
		full, err := cfg.Loss(batch, nil)
		if err != nil {
			t.Fatal(err)
		}
		oa, err := cfg.Loss(a, &den)
		if err != nil {
			t.Fatal(err)
		}
		ob, err := cfg.Loss(b, &den)
		if err != nil {
			t.Fatal(err)
		}
		shardCoef := append(append([][][]float32{}, oa.Coef[:2]...), append(oa.Coef[2], ob.Coef[0]...), ob.Coef[1])
		for i := range full.Coef {
			for s := range full.Coef[i] {
				for k := range full.Coef[i][s] {
					if full.Coef[i][s][k] != shardCoef[i][s][k] {
						t.Fatalf("%v: coef [%d][%d][%d] %v unsplit vs %v in shards", mode, i, s, k, full.Coef[i][s][k], shardCoef[i][s][k])
					}
				}
			}
		}
		m := oa.Metrics
		m.Merge(ob.Metrics)
		f := full.Metrics
		if !near(m.Loss, f.Loss, 1e-12) || !near(m.PGLoss, f.PGLoss, 1e-12) || !near(m.KL, f.KL, 1e-12) ||
			!near(m.Entropy, f.Entropy, 1e-12) || m.Tokens != f.Tokens || m.PGClipFrac != f.PGClipFrac ||
			m.PGClipFracLower != f.PGClipFracLower || !near(m.PPOKL, f.PPOKL, 1e-12) || m.MaxAbsLogRatio != f.MaxAbsLogRatio ||
			!near(m.ApproxKL, f.ApproxKL, 1e-12) || !(f.ApproxKL > 0) {
			t.Errorf("%v: merged metrics %+v\nunsplit %+v", mode, m, f)
		}
		// Without the global denominators a shard would be normalized on
		// its own and the sums would not agree: the denominators matter.
		alone, _ := cfg.Loss(a, nil)
		if alone.Coef[0][0][0] == full.Coef[0][0][0] {
			t.Errorf("%v: shard without global denominators has the unsplit weights; the test cannot tell", mode)
		}
	}
}

func TestLossErrors(t *testing.T) {
	cfg := DefaultLossConfig()
	good := StepInput{Logp: []float32{-1}, OldLogp: []float32{-1}, RefLogp: []float32{-1}, Adv: []float32{1}}
	bad := []struct {
		name  string
		cfg   func(*LossConfig)
		st    StepInput
		wants string
	}{
		{"length", nil, StepInput{Logp: []float32{-1, -2}, OldLogp: []float32{-1}, RefLogp: []float32{-1}, Adv: []float32{1}}, "length"},
		{"no ref", nil, StepInput{Logp: []float32{-1}, OldLogp: []float32{-1}, Adv: []float32{1}}, "reference"},
		{"NaN logp", nil, StepInput{Logp: []float32{float32(math.NaN())}, OldLogp: []float32{-1}, RefLogp: []float32{-1}, Adv: []float32{1}}, "non-finite"},
		{"dual clip 1", func(c *LossConfig) { c.ClipC = 1 }, good, "dual clip"},
		{"entropy missing", func(c *LossConfig) { c.EntropyCoef = 0.1 }, good, "entrop"},
	}
	for _, tc := range bad {
		c := cfg
		if tc.cfg != nil {
			tc.cfg(&c)
		}
		_, err := c.Loss([]TrajInput{{ID: "traj-x", Steps: []StepInput{tc.st}}}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.wants) {
			t.Errorf("%s: err %v, want one mentioning %q", tc.name, err, tc.wants)
		}
	}
	if _, err := cfg.Loss([]TrajInput{{Steps: []StepInput{good}, Tokens: 0}}, &Denoms{}); err == nil {
		t.Error("zero denominators accepted")
	}
	if _, err := cfg.Loss([]TrajInput{{Steps: []StepInput{good, good}, Tokens: 1}}, nil); err == nil {
		t.Error("Tokens smaller than the tokens present accepted")
	}
	for _, s := range []string{"trajectory", "token-mean", "seq-mean-token-sum", "seq-mean-token-mean"} {
		m, err := ParseAggMode(s)
		if err != nil || m.String() != s {
			t.Errorf("ParseAggMode(%q) = %v, %v", s, m, err)
		}
	}
}
