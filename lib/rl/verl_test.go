package rl

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

// verlCase is one (aggregation, KL estimator) case of testdata/verl_loss.json,
// written by testdata/verl_loss.py: verl's policy loss, KL penalties and
// agg_loss in float64 torch, with autograd's d(loss)/d(logp).
type verlCase struct {
	Agg             string      `json:"agg"`
	KL              string      `json:"kl"`
	Loss            float64     `json:"loss"`
	PGLoss          float64     `json:"pg_loss"`
	KLLoss          float64     `json:"kl_loss"`
	Entropy         float64     `json:"entropy"`
	PGClipFrac      float64     `json:"pg_clipfrac"`
	PGClipFracLower float64     `json:"pg_clipfrac_lower"`
	PPOKL           float64     `json:"ppo_kl"`
	Grad            [][]float64 `json:"grad"`
}

func TestAgainstVerlAutograd(t *testing.T) {
	raw, err := os.ReadFile("testdata/verl_loss.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Clip        float64     `json:"clip"`
		ClipC       float64     `json:"clip_c"`
		Beta        float64     `json:"beta"`
		EntropyCoef float64     `json:"entropy_coef"`
		Lengths     []int       `json:"lengths"`
		TrajOfRow   []int       `json:"traj_of_row"`
		Old         [][]float64 `json:"old"`
		Logp        [][]float64 `json:"logp"`
		Ref         [][]float64 `json:"ref"`
		Adv         [][]float64 `json:"adv"`
		Entropy     [][]float64 `json:"entropy"`
		Mask        [][]float64 `json:"mask"`
		Cases       []verlCase  `json:"cases"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	f32 := func(v []float64) []float32 {
		o := make([]float32, len(v))
		for i, x := range v {
			o[i] = float32(x)
		}
		return o
	}
	var batch []TrajInput
	type pos struct{ i, s int }
	rowAt := map[int]pos{}
	for r, n := range fx.Lengths {
		tr := fx.TrajOfRow[r]
		for len(batch) <= tr {
			batch = append(batch, TrajInput{})
		}
		st := StepInput{
			Logp: f32(fx.Logp[r][:n]), OldLogp: f32(fx.Old[r][:n]), RefLogp: f32(fx.Ref[r][:n]),
			Adv: f32(fx.Adv[r][:n]), Entropy: f32(fx.Entropy[r][:n]), Mask: make([]bool, n),
		}
		for k := 0; k < n; k++ {
			st.Mask[k] = fx.Mask[r][k] != 0
		}
		rowAt[r] = pos{tr, len(batch[tr].Steps)}
		batch[tr].Steps = append(batch[tr].Steps, st)
	}
	if len(fx.Cases) != 12 {
		t.Fatalf("fixture has %d cases", len(fx.Cases))
	}
	for _, c := range fx.Cases {
		cfg := LossConfig{ClipLow: fx.Clip, ClipHigh: fx.Clip, ClipC: fx.ClipC, KLCoef: fx.Beta, EntropyCoef: fx.EntropyCoef}
		var err error
		if cfg.Agg, err = ParseAggMode(c.Agg); err != nil {
			t.Fatal(err)
		}
		if cfg.KL, err = ParseKLType(c.KL); err != nil {
			t.Fatal(err)
		}
		out, err := cfg.Loss(batch, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := out.Metrics
		// verl adds 1e-8 to some denominators: agreement to ~1e-8 relative.
		for _, v := range []struct {
			name      string
			got, want float64
		}{
			{"loss", m.Loss, c.Loss}, {"pg_loss", m.PGLoss, c.PGLoss}, {"kl", m.KL, c.KLLoss},
			{"entropy", m.Entropy, c.Entropy}, {"pg_clipfrac", m.PGClipFrac, c.PGClipFrac},
			{"pg_clipfrac_lower", m.PGClipFracLower, c.PGClipFracLower}, {"ppo_kl", m.PPOKL, c.PPOKL},
		} {
			if !near(v.got, v.want, 1e-7) {
				t.Errorf("%s/%s: %s = %v, verl %v", c.Agg, c.KL, v.name, v.got, v.want)
			}
		}
		for r, n := range fx.Lengths {
			p := rowAt[r]
			for k := 0; k < n; k++ {
				got, want := float64(out.Coef[p.i][p.s][k]), c.Grad[r][k]
				if math.Abs(got-want) > 1e-7*math.Max(1, math.Abs(want)) {
					t.Errorf("%s/%s: row %d token %d: coef %v, autograd %v", c.Agg, c.KL, r, k, got, want)
				}
			}
			for k := n; k < len(c.Grad[r]); k++ {
				if c.Grad[r][k] != 0 {
					t.Fatalf("fixture: padding gradient %v at row %d column %d", c.Grad[r][k], r, k)
				}
			}
		}
	}
	// The fixture was built to hit every branch: make sure it still does.
	if c := fx.Cases[0]; c.PGClipFrac == 0 || c.PGClipFracLower == 0 {
		t.Errorf("fixture does not exercise the clips: %+v", c)
	}
}
