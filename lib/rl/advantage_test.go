package rl

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func near(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b))
}

func TestTaskAdvantageAllEqualAndSingle(t *testing.T) {
	trajs := []TrajReward{
		{ID: "a0", Task: "a", RT: 1}, {ID: "a1", Task: "a", RT: 1}, {ID: "a2", Task: "a", RT: 1},
		// 0.1 three times: the mean 0.1+0.1+0.1 = 0.30000000000000004 over 3
		// is not exactly 0.1, so only the explicit all-equal rule gives 0.
		{ID: "b0", Task: "b", RT: 0.1}, {ID: "b1", Task: "b", RT: 0.1}, {ID: "b2", Task: "b", RT: 0.1},
		{ID: "c0", Task: "c", RT: 0.7}, // single-sample group
	}
	for _, cfg := range []AdvConfig{DefaultAdvConfig(), {Eps: 1e-6, NormStd: false}, {Eps: 1e-6, NormStd: true, Std: StdPopulation}} {
		adv, err := cfg.ComputeAdvantages(trajs)
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range adv.Task {
			if a != 0 {
				t.Errorf("cfg %+v: trajectory %s: A^T = %v, want exactly 0", cfg, trajs[i].ID, a)
			}
		}
	}
}

// TestTaskAdvantageWorked checks two 4-sample groups by hand.
//
// Group "x", R^T = 1, 0, 0, 0: mean 0.25, deviations 0.75, −0.25, −0.25,
// −0.25; Σd² = 0.5625 + 3·0.0625 = 0.75. Unbiased var = 0.75/3 = 0.25, std
// 0.5, so A = 0.75/0.500001 = 1.4999970000060, −0.25/0.500001 =
// −0.4999990000020. Population var = 0.75/4 = 0.1875, std = 0.4330127019,
// A = 0.75/0.4330137019 = 1.7320469…
//
// Group "y", R^T = 0.2, 0.4, 0.6, 0.8 (a fractional reward): mean 0.5,
// deviations −0.3, −0.1, 0.1, 0.3; Σd² = 0.2; unbiased std =
// sqrt(0.2/3) = 0.2581988897, A = −0.3/0.2581998897 = −1.1618905…,
// −0.1/0.2581998897 = −0.3872968….
// Without std normalization (Dr.GRPO) A is the deviation itself.
func TestTaskAdvantageWorked(t *testing.T) {
	trajs := []TrajReward{
		{ID: "x0", Task: "x", RT: 1}, {ID: "y0", Task: "y", RT: 0.2},
		{ID: "x1", Task: "x", RT: 0}, {ID: "y1", Task: "y", RT: 0.4},
		{ID: "x2", Task: "x", RT: 0}, {ID: "y2", Task: "y", RT: 0.6},
		{ID: "x3", Task: "x", RT: 0}, {ID: "y3", Task: "y", RT: 0.8},
	}
	adv, err := DefaultAdvConfig().ComputeAdvantages(trajs)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{
		1.4999970000060, -1.1618905,
		-0.4999990000020, -0.3872968,
		-0.4999990000020, 0.3872968,
		-0.4999990000020, 1.1618905,
	}
	for i := range want {
		if !near(adv.Task[i], want[i], 1e-7) {
			t.Errorf("unbiased: %s: A^T = %.10f, want %.10f", trajs[i].ID, adv.Task[i], want[i])
		}
	}
	cfg := DefaultAdvConfig()
	cfg.Std = StdPopulation
	adv, _ = cfg.ComputeAdvantages(trajs)
	if !near(adv.Task[0], 0.75/(math.Sqrt(0.1875)+1e-6), 1e-12) || !near(adv.Task[0], 1.7320469, 1e-7) {
		t.Errorf("population: A^T(x0) = %.10f, want 1.7320469", adv.Task[0])
	}
	cfg = DefaultAdvConfig()
	cfg.NormStd = false
	adv, _ = cfg.ComputeAdvantages(trajs)
	for i, w := range []float64{0.75, -0.3, -0.25, -0.1, -0.25, 0.1, -0.25, 0.3} {
		if !near(adv.Task[i], w, 1e-12) {
			t.Errorf("no std: %s: A^T = %v, want %v", trajs[i].ID, adv.Task[i], w)
		}
	}
	// Stats: R^T mean over 8 = (1 + 2)/8.
	if !near(adv.Stats.RewardTaskMean, 3.0/8, 1e-12) {
		t.Errorf("reward mean %v, want 0.375", adv.Stats.RewardTaskMean)
	}
}

func TestMemAdvantage(t *testing.T) {
	nan := math.NaN()
	// Task pool: defined R^M values 0.1, 0.5, −0.2, 0.3 (and a NaN excluded).
	// mean 0.175, deviations −0.075, 0.325, −0.375, 0.125, Σd² = 0.26750,
	// unbiased std = sqrt(0.2675/3) = 0.2986079…
	trajs := []TrajReward{
		{ID: "t0", Task: "t", RT: 1, RM: []float64{0.1, 0.5}},
		{ID: "t1", Task: "t", RT: 0, RM: []float64{-0.2, nan, 0.3}},
		{ID: "u0", Task: "u", RT: 0, RM: []float64{0.4}}, // a pool of one → 0
	}
	adv, err := DefaultAdvConfig().ComputeAdvantages(trajs)
	if err != nil {
		t.Fatal(err)
	}
	std := math.Sqrt(0.2675 / 3)
	want := [][]float64{{-0.075 / (std + 1e-6), 0.325 / (std + 1e-6)}, {-0.375 / (std + 1e-6), 0, 0.125 / (std + 1e-6)}, {0}}
	for i := range want {
		for j := range want[i] {
			if !near(adv.Mem[i][j], want[i][j], 1e-12) {
				t.Errorf("A^M[%d][%d] = %v, want %v", i, j, adv.Mem[i][j], want[i][j])
			}
		}
	}
	if !(adv.Mem[0][1] > adv.Mem[0][0] && adv.Mem[0][1] > adv.Mem[1][0] && adv.Mem[0][1] > adv.Mem[1][2]) {
		t.Errorf("the block with the largest R^M does not get the largest A^M: %v", adv.Mem)
	}
	if adv.Stats.MemBlocks != 5 || !near(adv.Stats.RewardMemMean, (0.1+0.5-0.2+0.3+0.4)/5, 1e-12) {
		t.Errorf("mem stats %+v", adv.Stats)
	}

	// Step pool: step 0 pool {0.1, −0.2}: mean −0.05, unbiased std
	// sqrt(2·0.0225/1) = 0.2121320…; step 1 pool {0.5} (NaN excluded) → 0;
	// step 2 pool {0.3} → 0.
	cfg := DefaultAdvConfig()
	cfg.MemPool = PoolStep
	adv, err = cfg.ComputeAdvantages(trajs)
	if err != nil {
		t.Fatal(err)
	}
	s0 := math.Sqrt(0.045)
	if !near(adv.Mem[0][0], 0.15/(s0+1e-6), 1e-12) || !near(adv.Mem[1][0], -0.15/(s0+1e-6), 1e-12) ||
		adv.Mem[0][1] != 0 || adv.Mem[1][2] != 0 || adv.Mem[1][1] != 0 {
		t.Errorf("step pool A^M = %v", adv.Mem)
	}
}

func TestNonFiniteRewards(t *testing.T) {
	trajs := []TrajReward{
		{ID: "ok", Task: "t", RT: 1},
		{ID: "broken-7", Task: "t", RT: math.NaN()},
		{ID: "inf", Task: "t", RT: 0, RM: []float64{math.Inf(1)}},
	}
	_, err := DefaultAdvConfig().ComputeAdvantages(trajs)
	if err == nil || !strings.Contains(err.Error(), "broken-7") {
		t.Fatalf("NaN R^T: error %v, want one naming broken-7", err)
	}
	_, err = DefaultAdvConfig().ComputeAdvantages(trajs[2:])
	if err == nil || !strings.Contains(err.Error(), `"inf"`) {
		t.Fatalf("Inf R^M: error %v, want one naming the trajectory", err)
	}
	cfg := DefaultAdvConfig()
	cfg.NonFinite = NonFiniteZero
	adv, err := cfg.ComputeAdvantages(trajs)
	if err != nil {
		t.Fatal(err)
	}
	if adv.Replaced != 2 {
		t.Errorf("Replaced = %d, want 2", adv.Replaced)
	}
	// R^T becomes 1, 0, 0: mean 1/3, unbiased std sqrt((4/9 + 2/9)/2) = sqrt(1/3).
	want := (2.0 / 3) / (math.Sqrt(1.0/3) + 1e-6)
	if !near(adv.Task[0], want, 1e-12) {
		t.Errorf("A^T(ok) = %v, want %v", adv.Task[0], want)
	}
	if adv.Mem[2][0] != 0 {
		t.Errorf("A^M of a lone replaced block = %v, want 0", adv.Mem[2][0])
	}
}

func TestTokenAdvantages(t *testing.T) {
	cfg := DefaultAdvConfig()
	got, err := cfg.TokenAdvantages(nil, 6, 1, 4, 0.5, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{0.5, 2.5, 2.5, 2.5, 0.5, 0.5}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("token advantages %v, want %v", got, want)
		}
	}
	cfg.Alpha = 0.5
	got, _ = cfg.TokenAdvantages(got, 6, 0, 2, -1, 2)
	if got[0] != 0 || got[1] != 0 || got[2] != -1 || len(got) != 6 {
		t.Errorf("α = 0.5: %v", got)
	}
	cfg.MemAdv = false
	got, _ = cfg.TokenAdvantages(nil, 3, 0, 3, 0.25, 9)
	for _, v := range got {
		if v != 0.25 {
			t.Errorf("memory advantage off: %v", got)
		}
	}
	cfg = DefaultAdvConfig()
	got, _ = cfg.TokenAdvantages(nil, 2, -1, -1, 0.25, 9)
	if got[0] != 0.25 || got[1] != 0.25 {
		t.Errorf("no mem span: %v", got)
	}
	if _, err := cfg.TokenAdvantages(nil, 3, 1, 5, 0, 0); !errors.Is(err, ErrMemSpan) {
		t.Errorf("span past the end: err %v", err)
	}
	if _, err := cfg.TokenAdvantages(nil, 3, 2, 1, 0, 0); !errors.Is(err, ErrMemSpan) {
		t.Errorf("reversed span: err %v", err)
	}
}

func TestMemoryReward(t *testing.T) {
	ln := func(x float64) float32 { return float32(math.Log(x)) }
	p, err := GeoMeanProb([]float32{ln(0.25), ln(1)})
	if err != nil || !near(p, 0.5, 1e-6) {
		t.Errorf("geo mean of 0.25, 1 = %v (%v), want 0.5", p, err)
	}
	// memory: sqrt(0.8·0.2) = 0.4; history: 0.1 → R^M = 0.3.
	r, err := MemoryReward([]float32{ln(0.8), ln(0.2)}, []float32{ln(0.1), ln(0.1)})
	if err != nil || !near(r, 0.3, 1e-6) {
		t.Errorf("R^M = %v (%v), want 0.3", r, err)
	}
	if p, err := GeoMeanProb([]float32{float32(math.Inf(-1)), 0}); err != nil || p != 0 {
		t.Errorf("a zero-probability token: %v %v", p, err)
	}
	if _, err := GeoMeanProb(nil); err == nil {
		t.Error("empty gold accepted")
	}
	if _, err := GeoMeanProb([]float32{float32(math.NaN())}); err == nil {
		t.Error("NaN log-prob accepted")
	}
	if _, err := MemoryReward([]float32{0}, []float32{0, 0}); err == nil {
		t.Error("different gold lengths accepted")
	}
	// Objective 0: aliases 0.5 and sqrt(0.9·0.1) = 0.3 → max 0.5;
	// objective 1: 0.2. Mean 0.35. History: 0.1 and 0.3 → 0.2. R^M = 0.15.
	mem := [][][]float32{{{ln(0.5)}, {ln(0.9), ln(0.1)}}, {{ln(0.2)}}}
	hist := [][][]float32{{{ln(0.1)}, {ln(0.1), ln(0.1)}}, {{ln(0.3)}}}
	p, err = MultiGoldProb(mem)
	if err != nil || !near(p, 0.35, 1e-6) {
		t.Errorf("multi gold prob %v (%v), want 0.35", p, err)
	}
	r, err = MultiMemoryReward(mem, hist)
	if err != nil || !near(r, 0.15, 1e-6) {
		t.Errorf("multi R^M %v (%v), want 0.15", r, err)
	}
	if _, err := MultiMemoryReward(mem, hist[:1]); err == nil {
		t.Error("objective count mismatch accepted")
	}
}

// MemStdFloor: a pool whose std is under the floor is divided by the floor
// (the task pool of TestMemAdvantage has std 0.2986…: a floor of 0.5 takes
// over, one of 0.1 does not), A^T never sees it, and a negative floor is
// refused.
func TestMemStdFloor(t *testing.T) {
	trajs := []TrajReward{
		{ID: "t0", Task: "t", RT: 1, RM: []float64{0.1, 0.5}},
		{ID: "t1", Task: "t", RT: 0, RM: []float64{-0.2, 0.3}},
	}
	std := math.Sqrt(0.2675 / 3)
	for _, c := range []struct{ floor, den float64 }{{0, std}, {0.1, std}, {0.5, 0.5}} {
		cfg := DefaultAdvConfig()
		cfg.MemStdFloor = c.floor
		adv, err := cfg.ComputeAdvantages(trajs)
		if err != nil {
			t.Fatal(err)
		}
		if want := 0.325 / (c.den + 1e-6); !near(adv.Mem[0][1], want, 1e-12) {
			t.Errorf("floor %g: A^M = %v, want %v", c.floor, adv.Mem[0][1], want)
		}
		if want := 1 / (math.Sqrt(0.5) + 1e-6) / 2; !near(adv.Task[0], want, 1e-12) {
			t.Errorf("floor %g: A^T = %v, want %v", c.floor, adv.Task[0], want)
		}
	}
	cfg := DefaultAdvConfig()
	cfg.MemStdFloor = -1
	if _, err := cfg.ComputeAdvantages(trajs); err == nil {
		t.Error("a negative floor was accepted")
	}
}

// TestMemPerObjective works A^M of MemPerObjective by hand: one step pool of
// three memories of a two-objective task.
func TestMemPerObjective(t *testing.T) {
	trajs := []TrajReward{
		{ID: "a", Task: "t", RT: 1, RM: []float64{0.1}, RMObj: [][]float64{{0, 0.2}}},
		{ID: "b", Task: "t", RT: 0, RM: []float64{0}, RMObj: [][]float64{{0, 0}}},
		{ID: "c", Task: "t", RT: 0, RM: []float64{0.2}, RMObj: [][]float64{{0.3, 0.1}}},
	}
	cfg := DefaultAdvConfig()
	cfg.MemPool, cfg.MemPerObjective = PoolStep, true
	adv, err := cfg.ComputeAdvantages(trajs)
	if err != nil {
		t.Fatal(err)
	}
	// Objective 0: {0, 0, 0.3}, mean 0.1, unbiased std √0.03: z = −0.1/√0.03,
	// −0.1/√0.03, 0.2/√0.03. Objective 1: {0.2, 0, 0.1}, mean 0.1, std 0.1:
	// z = 1, −1, 0. A^M is their mean, z-scored again.
	s0, s1 := math.Sqrt(0.03)+1e-6, 0.1+1e-6
	want := restandardize([]float64{(-0.1/s0 + 0.1/s1) / 2, (-0.1/s0 - 0.1/s1) / 2, (0.2 / s0) / 2})
	for i, w := range want {
		if !near(adv.Mem[i][0], w, 1e-12) {
			t.Errorf("A^M of %s = %v, want %v", trajs[i].ID, adv.Mem[i][0], w)
		}
	}
	// The pooled z-score of the mean (the default) ranks by RM alone:
	// c > a > b.
	cfg.MemPerObjective = false
	plain, err := cfg.ComputeAdvantages(trajs)
	if err != nil {
		t.Fatal(err)
	}
	if !(plain.Mem[2][0] > plain.Mem[0][0] && plain.Mem[0][0] > plain.Mem[1][0]) {
		t.Errorf("pooled A^M = %v", plain.Mem)
	}
	// With a floor of 0.5 every objective divides by it: objective 0 −0.2,
	// −0.2, 0.4; objective 1 0.2, −0.2, 0; means 0, −0.2, 0.2.
	cfg.MemPerObjective, cfg.MemStdFloor = true, 0.5
	adv, err = cfg.ComputeAdvantages(trajs)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range restandardize([]float64{0, -0.2 * 0.5 / (0.5 + 1e-6), 0.2 * 0.5 / (0.5 + 1e-6)}) {
		if !near(adv.Mem[i][0], w, 1e-9) {
			t.Errorf("floored A^M of %s = %v, want %v", trajs[i].ID, adv.Mem[i][0], w)
		}
	}
	// A step with a defined R^M but no per-objective terms is an error
	// naming it; so are pools whose objective counts differ.
	cfg.MemStdFloor = 0
	bad := append([]TrajReward(nil), trajs...)
	bad[1].RMObj = nil
	if _, err := cfg.ComputeAdvantages(bad); err == nil || !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("missing per-objective terms: error %v, want one naming b", err)
	}
	bad[1].RMObj = [][]float64{{0}}
	if _, err := cfg.ComputeAdvantages(bad); err == nil || !strings.Contains(err.Error(), "objectives") {
		t.Errorf("ragged objectives: error %v", err)
	}
}

// restandardize is (v − mean)/(unbiased std + 1e-6), worked out here.
func restandardize(v []float64) []float64 {
	var m, ss float64
	for _, x := range v {
		m += x
	}
	m /= float64(len(v))
	for _, x := range v {
		ss += (x - m) * (x - m)
	}
	sd := math.Sqrt(ss/float64(len(v)-1)) + 1e-6
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = (x - m) / sd
	}
	return out
}
