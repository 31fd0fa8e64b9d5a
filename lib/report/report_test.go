package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/qa"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/testenv"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func byMetric(scores []records.Score, run, src string, k int32) map[string]records.Score {
	m := map[string]records.Score{}
	for _, s := range scores {
		if s.Run == run && s.DataSource == src && s.K == k {
			m[s.Metric] = s
		}
	}
	return m
}

// TestHandValues scores testdata/score/hand.jsonl, whose values were worked
// out by hand: "Paris; East Berlin" (EM 1,0; F1 1,2/3), "Rome" for two
// objectives (all 0), "shakespeare;  The Leonardo." (both right by alias).
func TestHandValues(t *testing.T) {
	path := filepath.Join(testenv.RepoRoot(t), "testdata", "score", "hand.jsonl")
	for _, sum := range []bool{false, true} {
		acc := NewAccumulator(Options{SumObjectives: sum, Seed: 1})
		err := records.Each(path, func(_ int, r *records.Rollout) error { acc.Add("hand", r); return nil })
		if err != nil {
			t.Fatal(err)
		}
		m := byMetric(acc.Scores(), "hand", "demo", 2)
		want := map[string]float64{
			MetricEM: 50, MetricF1: (100*(1+2.0/3)/2 + 0 + 100) / 3, MetricSubEM: 200.0 / 3, MetricAllCorrect: 100.0 / 3,
			MetricFormatFailure: 100.0 / 3, MetricRewardTask: 1.0 / 3, MetricTurns: 4.0 / 3, MetricTotalTokens: 62.0 / 3,
			MetricPeakTokens: 20, MetricPGoldMem: 0.4, MetricRMem: 0.125,
		}
		if sum {
			want[MetricEM], want[MetricF1], want[MetricSubEM] = 1, (5.0/3+2)/3, 4.0/3
		}
		for name, w := range want {
			s, ok := m[name]
			if !ok || !near(s.Value, w) {
				t.Errorf("sum=%v %s = %+v, want %v", sum, name, s, w)
				continue
			}
			if s.CILow > s.Value+1e-9 || s.CIHigh < s.Value-1e-9 {
				t.Errorf("%s: interval [%v, %v] misses %v", name, s.CILow, s.CIHigh, s.Value)
			}
		}
		if m[MetricEM].N != 3 || m[MetricPGoldMem].N != 2 || m[MetricRMem].N != 2 {
			t.Errorf("n: em %d, p_gold_mem %d, r_mem %d", m[MetricEM].N, m[MetricPGoldMem].N, m[MetricRMem].N)
		}
		if lo, hi := m[MetricEM].CILow, m[MetricEM].CIHigh; !sum && (lo < 0 || hi > 100 || hi-lo < 10) {
			t.Errorf("em interval [%v, %v] for values 50, 0, 100", lo, hi)
		}
	}
}

func TestBootstrap(t *testing.T) {
	xs := make([]float64, 400)
	for i := range xs {
		xs[i] = float64(i % 2) // p = 0.5: standard error 0.025, 95% half-width ≈ 0.049
	}
	lo, hi := Bootstrap(xs, 2000, 7)
	if !(lo < 0.5 && hi > 0.5) || (hi-lo)/2 < 0.04 || (hi-lo)/2 > 0.06 {
		t.Errorf("interval [%v, %v], want about 0.5 ± 0.049", lo, hi)
	}
	lo2, hi2 := Bootstrap(xs, 2000, 7)
	lo3, hi3 := Bootstrap(xs, 2000, 8)
	if lo2 != lo || hi2 != hi {
		t.Error("the same seed must give the same interval")
	}
	if lo3 == lo && hi3 == hi {
		t.Error("another seed gave the identical interval")
	}
	if lo, hi := Bootstrap([]float64{3, 3, 3}, 100, 1); lo != 3 || hi != 3 {
		t.Errorf("constant values: [%v, %v]", lo, hi)
	}
}

func TestLabels(t *testing.T) {
	got, err := Labels([]string{"runs/mempo.parquet", "grpo.jsonl", "-"}, nil)
	if err != nil || strings.Join(got, ",") != "mempo,grpo,stdin" {
		t.Errorf("got %v, %v", got, err)
	}
	if _, err := Labels([]string{"a/rollouts.parquet", "b/rollouts.parquet"}, nil); err == nil || !strings.Contains(err.Error(), "--label") {
		t.Errorf("same default label: %v", err)
	}
	if got, err := Labels([]string{"a/rollouts.parquet", "b/rollouts.parquet"}, []string{"m", "m"}); err != nil || got[1] != "m" {
		t.Errorf("explicit shared label: %v %v", got, err)
	}
	if _, err := Labels([]string{"a.parquet"}, []string{"x", "y"}); err == nil {
		t.Error("label count mismatch accepted")
	}
}

// realTask is one objective from the real data: question and alias list.
type realTask struct {
	q     string
	golds []string
}

func loadReal(t *testing.T) map[string][]realTask {
	t.Helper()
	d := testenv.SharedData(t)
	out := map[string][]realTask{}
	for src, name := range map[string]string{"nq": "nq/test-1000.jsonl", "triviaqa": "triviaqa/test-1000.jsonl", "popqa": "popqa/test-1000.jsonl"} {
		b, err := os.ReadFile(filepath.Join(d, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[:240] {
			var r struct {
				Question string   `json:"question"`
				Golds    []string `json:"golden_answers"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			out[src] = append(out[src], realTask{r.Question, r.Golds})
		}
	}
	b, err := os.ReadFile(filepath.Join(d, "hotpotqa", "dev-questions-full.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[:480] {
		var r struct {
			RewardModel struct {
				GroundTruth string `json:"ground_truth"`
			} `json:"reward_model"`
			ExtraInfo struct {
				Question string `json:"question"`
			} `json:"extra_info"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		out["hotpotqa"] = append(out["hotpotqa"], realTask{r.ExtraInfo.Question, []string{r.RewardModel.GroundTruth}})
	}
	return out
}

// buildRollouts makes k-objective trajectories from real questions: answer i
// of trajectory j is right (an alias), partly right (the alias plus extra
// words) or wrong (another question's gold) by (i+j) mod 3, and returns the
// EM (mean ×100) the scorer must find, counted independently here.
func buildRollouts(tasks []realTask, src string, k int, run int) ([]records.Rollout, float64) {
	var rs []records.Rollout
	emTotal := 0.0
	for j := 0; (j+1)*k <= len(tasks); j++ {
		chunk := tasks[j*k : (j+1)*k]
		r := records.Rollout{TaskID: fmt.Sprintf("%s-k%d-%d", src, k, j), DataSource: src, K: int32(k), Group: int64(j),
			Policy: "ckpt-test", Keep: "1", FormatOK: true, Steps: []records.Step{}}
		var answers []string
		em := 0.0
		for i, tk := range chunk {
			r.Questions = append(r.Questions, tk.q)
			r.Golds = append(r.Golds, tk.golds)
			var a string
			switch (i + j + run) % 3 {
			case 0:
				a = tk.golds[len(tk.golds)-1]
				em++
			case 1:
				a = tk.golds[0] + " and also something else"
			default:
				a = tasks[(j*k+i+len(tasks)/2)%len(tasks)].golds[0]
				for _, g := range tk.golds {
					if qa.Normalize(g) == qa.Normalize(a) {
						em++
						break
					}
				}
			}
			answers = append(answers, strings.ReplaceAll(a, ";", ","))
		}
		r.Answer = strings.Join(answers, "; ")
		if j%10 == 9 { // every tenth trajectory answers one objective too few
			r.Answer = strings.Join(answers[:k-1], "; ")
			r.FormatOK = false
			em = 0
		}
		r.Turns = int32(1 + j%4)
		r.PeakTokens = int64(500 + 100*k)
		r.TotalTokens = r.PeakTokens * int64(r.Turns)
		rs = append(rs, r)
		emTotal += 100 * em / float64(k)
	}
	return rs, emTotal / float64(len(rs))
}

// TestRunOnRealGolds runs the whole scorer on rollouts built from real NQ,
// TriviaQA, PopQA and HotpotQA golds, two runs, Parquet and JSONL inputs, and
// checks the scores file, the table and the PNGs.
func TestRunOnRealGolds(t *testing.T) {
	real := loadReal(t)
	dir := t.TempDir()
	type cell struct {
		src string
		k   int
	}
	wantEM := map[string]map[cell]float64{}
	var files []string
	for run, ext := range []string{".parquet", ".jsonl"} {
		label := []string{"mempo", "grpo"}[run]
		wantEM[label] = map[cell]float64{}
		var all []records.Rollout
		for _, c := range []cell{{"nq", 1}, {"triviaqa", 1}, {"popqa", 1}, {"nq", 2}, {"hotpotqa", 2}, {"hotpotqa", 4}, {"hotpotqa", 6}} {
			rs, em := buildRollouts(real[c.src], c.src, c.k, run)
			wantEM[label][c] = em
			all = append(all, rs...)
		}
		path := filepath.Join(dir, "rollouts-"+label+ext)
		if err := records.WriteFile(path, all); err != nil {
			t.Fatal(err)
		}
		files = append(files, path)
	}
	metrics := filepath.Join(testenv.RepoRoot(t), "testdata", "score", "metrics-go.parquet")
	var out bytes.Buffer
	cfg := Config{Rollouts: files, Labels: []string{"mempo", "grpo"}, Metrics: []string{metrics, metrics},
		Out: filepath.Join(dir, "scores.parquet"), ReportDir: filepath.Join(dir, "report"), Options: Options{Seed: 1}}
	written, err := Run(cfg, &out)
	if d := envconfig.KeepReport.Get(); d != "" {
		defer os.CopyFS(d, os.DirFS(cfg.ReportDir))
	}
	if err != nil {
		t.Fatal(err)
	}
	scores, err := records.ReadFile[records.Score](cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	for label, cells := range wantEM {
		for c, w := range cells {
			m := byMetric(scores, label, c.src, int32(c.k))
			if s := m[MetricEM]; !near(s.Value, w) {
				t.Errorf("%s %s k=%d: em %v, want %v", label, c.src, c.k, s.Value, w)
			}
			f1, em := m[MetricF1].Value, m[MetricEM].Value
			if !(f1 > em && f1 < 100) {
				t.Errorf("%s %s k=%d: F1 %v should lie between EM %v and 100 (partly right answers)", label, c.src, c.k, f1, em)
			}
			if s := m[MetricFormatFailure]; !near(s.Value, 100*float64(int(s.N)/10)/float64(s.N)) {
				t.Errorf("%s %s k=%d: format failure %v of %d", label, c.src, c.k, s.Value, s.N)
			}
			if s := m[MetricPeakTokens]; s.Value != float64(500+100*c.k) || s.CILow != s.Value {
				t.Errorf("%s %s k=%d: peak %+v", label, c.src, c.k, s)
			}
		}
	}
	table := out.String()
	for _, want := range []string{"### hotpotqa", "| run | k=2 EM | k=2 F1 | k=2 TT | k=2 PT | k=4 EM |", "| mempo |", "| grpo |", "### All metrics"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if len(written) != 8 {
		t.Errorf("report files: %v", written)
	}
	// The index pages list every table and figure; the HTML inlines the tables.
	idx, _ := os.ReadFile(filepath.Join(cfg.ReportDir, "index.html"))
	idxMD, _ := os.ReadFile(filepath.Join(cfg.ReportDir, "index.md"))
	for _, f := range written[:6] {
		name := filepath.Base(f)
		if !strings.Contains(string(idx), name) || !strings.Contains(string(idxMD), name) {
			t.Errorf("index lacks %s", name)
		}
	}
	if !strings.Contains(string(idx), "<th>run</th>") || !strings.Contains(string(idx), `<img src="f1_vs_k.png"`) || strings.Contains(string(idx), "http") {
		t.Errorf("index.html: tables not inlined, figures missing, or something not offline")
	}
	for _, name := range []string{"f1_vs_k.png", "peak_tokens_vs_k.png", "reward.png", "memory_reward.png", "peak_tokens_updates.png"} {
		f, err := os.Open(filepath.Join(cfg.ReportDir, name))
		if err != nil {
			t.Error(err)
			continue
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		// A 576×384 plot area, and the legend's column beside it.
		if b := img.Bounds(); b.Dx() < 576 || b.Dx() > 576+300 || b.Dy() != 384 {
			t.Errorf("%s: %dx%d, want 384 high and 576 plus a legend wide", name, b.Dx(), b.Dy())
		}
	}
	if b, err := os.ReadFile(filepath.Join(cfg.ReportDir, "table.md")); err != nil || string(b) != table {
		t.Errorf("table.md differs from stdout: %v", err)
	}
}

// rawRollout has Rollout's required columns and none of its validation.
type rawRollout struct {
	TaskID string     `parquet:"task_id"`
	K      int32      `parquet:"k"`
	Golds  [][]string `parquet:"golds,list"`
	Answer string     `parquet:"answer"`
}

// TestMalformedRowNamed: a bad rollouts row stops mempo-score with the file,
// row number and field, in JSONL and Parquet, and no scores file is written.
func TestMalformedRowNamed(t *testing.T) {
	root := testenv.RepoRoot(t)
	pq := filepath.Join(root, "testdata", "score", "bad-row.parquet")
	if envconfig.WriteFixtures.Get() != "" {
		rows := []rawRollout{{"ok-1", 1, [][]string{{"Paris"}}, "Paris"}, {"ok-2", 1, [][]string{{"Rome"}}, "Milan"}, {"bad-3", 2, [][]string{{"Paris"}}, "Paris"}}
		if err := parquet.WriteFile(pq, rows); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range []string{filepath.Join(root, "testdata", "score", "bad-row.jsonl"), pq} {
		out := filepath.Join(t.TempDir(), "scores.parquet")
		_, err := Run(Config{Rollouts: []string{path}, Out: out}, &bytes.Buffer{})
		want := path + `: row 3: field "golds": has 1 gold lists for k = 2`
		if err == nil || err.Error() != want {
			t.Errorf("err = %v, want %s", err, want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: a scores file was written despite the bad row", path)
		}
	}
}

// TestLoops: three steps in a row with the same output ids are a loop; two,
// the same ids apart, or empty outputs are not.
func TestLoops(t *testing.T) {
	step := func(ids ...int32) records.Step { return records.Step{OutputIDs: ids} }
	for _, c := range []struct {
		name  string
		steps []records.Step
		want  bool
	}{
		{"three in a row", []records.Step{step(1, 2), step(3), step(3), step(3), step(4)}, true},
		{"two in a row", []records.Step{step(3), step(3), step(4), step(3)}, false},
		{"same ids apart", []records.Step{step(3), step(4), step(3), step(4), step(3)}, false},
		{"empty outputs", []records.Step{step(), step(), step()}, false},
		{"no steps", nil, false},
	} {
		r := &records.Rollout{Steps: c.steps}
		if got := Loops(r); got != c.want {
			t.Errorf("%s: Loops = %v, want %v", c.name, got, c.want)
		}
		if got := ScoreRollout(r, Options{})[MetricLoops]; got != b100(c.want) {
			t.Errorf("%s: loops metric %v", c.name, got)
		}
	}
}
