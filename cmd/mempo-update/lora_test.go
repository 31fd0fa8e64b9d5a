package main

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/peft"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/update"
)

// loraArgs is a LoRA update of the fixture's policy: KL on (the reference is
// the base with the adapter off), a high rate so the adapter moves.
func loraArgs(f updFixture, out string, extra ...string) []string {
	return append([]string{"--model", f.model, "--rollouts", f.rollouts, "--out", out, "--device", "cpu",
		"--lr", "1e-2", "--mini-batch", "2", "--lora-rank", "4", "--lora-targets", "q_proj,v_proj,o_proj,down_proj",
		"--kl-coef", "0.1"}, extra...)
}

// TestLoRAUpdate: a LoRA update writes a peft adapter directory (config and
// factors named as peft names them, the base untouched), an optimizer file
// holding only the adapter's moments, and metrics whose KL starts at 0 (the
// reference is the base, and a fresh adapter is the base); `merge` writes a
// full checkpoint whose log-probs equal those of the unmerged adapter; a
// stopped run resumes to the same adapter bit for bit; --ref is refused.
func TestLoRAUpdate(t *testing.T) {
	f := newUpdFixture(t)
	out := filepath.Join(f.root, "lora1")
	if msg, err := runUpdateCmd(t, loraArgs(f, out)...); err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	a, err := peft.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if a.Config.R != 4 || a.Config.Alpha != 8 || !slices.Equal(a.Config.Targets, []string{"down_proj", "o_proj", "q_proj", "v_proj"}) {
		t.Errorf("adapter config %+v", a.Config)
	}
	if abs, _ := filepath.Abs(f.model); a.Config.Base != abs {
		t.Errorf("base_model_name_or_path %q, want %q", a.Config.Base, abs)
	}
	if len(a.Tensors) != 2*4*2 {
		t.Errorf("%d adapter tensors, want 16", len(a.Tensors))
	}
	B := a.Tensors["base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"]
	if B == nil || slices.Max(B) == 0 && slices.Min(B) == 0 {
		t.Error("lora_B of down_proj did not move from zero")
	}
	if s := a.Shapes["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"]; !slices.Equal(s, []int{4, 16}) {
		t.Errorf("q_proj lora_A shape %v, want [4 16]", s)
	}
	st, rs, err := update.ReadOptimizer(filepath.Join(out, update.OptimizerFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ExpAvg) != len(a.Tensors) || rs.GlobalStep != 3 {
		t.Errorf("optimizer state for %d tensors (want %d), global step %d (want 3)", len(st.ExpAvg), len(a.Tensors), rs.GlobalStep)
	}
	for name := range st.ExpAvg {
		if !strings.Contains(name, ".lora_") {
			t.Errorf("optimizer state for the frozen base's %s", name)
		}
	}
	rows, err := records.ReadFile[records.Update](filepath.Join(out, update.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0].KL == nil || rows[2].KL == nil || *rows[0].KL != 0 || *rows[2].KL == 0 {
		t.Fatalf("metrics: %d rows, KL first %v last %v (want 3 rows, 0 then not 0)", len(rows), rows[0].KL, rows[len(rows)-1].KL)
	}
	for _, e := range []string{"model.safetensors", "config.json"} {
		if _, err := os.Stat(filepath.Join(out, e)); err == nil {
			t.Errorf("the adapter directory holds a full-model file %s", e)
		}
	}

	// merge, and the unmerged adapter's log-probs against the merged model's.
	merged := filepath.Join(f.root, "merged")
	if msg, err := runUpdateCmd(t, "merge", "--model", f.model, "--adapter", out, "--out", merged); err != nil {
		t.Fatalf("merge: %v\n%s", err, msg)
	}
	ma, err := model.LoadAdapted(f.model, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	mm, err := model.Load(merged, nil)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := model.Load(f.model, nil)
	seqs := [][]int{{1, 5, 7, 2, 9, 11, 3, 30, 4}, {4, 4, 0, 12, 17}}
	la, _ := ma.LogProbs(seqs)
	lm, _ := mm.LogProbs(seqs)
	lb, _ := base.LogProbs(seqs)
	var dMerged, dBase float64
	for i := range la {
		for j := range la[i] {
			dMerged = math.Max(dMerged, math.Abs(float64(la[i][j]-lm[i][j])))
			dBase = math.Max(dBase, math.Abs(float64(la[i][j]-lb[i][j])))
		}
	}
	if dMerged > 1e-5 || dBase < 1e-4 {
		t.Errorf("adapter vs merged log-probs differ by %g (want ≤ 1e-5); adapter vs base by %g (want a visible change)", dMerged, dBase)
	}

	// Stop after one step, resume: the same adapter bit for bit.
	out2 := filepath.Join(f.root, "lora2")
	if msg, err := runUpdateCmd(t, loraArgs(f, out2, "--stop-after", "1")...); err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	if msg, err := runUpdateCmd(t, loraArgs(f, out2)...); err != nil || !strings.Contains(msg, "resuming at step 1") {
		t.Fatalf("resume: %v\n%s", err, msg)
	}
	b, err := peft.Read(out2)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range a.Tensors {
		if !slices.Equal(v, b.Tensors[name]) {
			t.Errorf("resumed run differs at %s", name)
			break
		}
	}

	// Continue the adapter in a second update (the next iteration).
	out3 := filepath.Join(f.root, "lora3")
	if msg, err := runUpdateCmd(t, "--model", f.model, "--adapter", out, "--rollouts", f.rollouts, "--out", out3,
		"--device", "cpu", "--lr", "1e-2", "--mini-batch", "2", "--kl-coef", "0.1"); err != nil {
		t.Fatalf("second iteration: %v\n%s", err, msg)
	}
	if _, rs, err := update.ReadOptimizer(filepath.Join(out3, update.OptimizerFile)); err != nil || rs.GlobalStep != 6 {
		t.Errorf("second iteration: global step %d (want 6), %v", rs.GlobalStep, err)
	}

	if _, err := runUpdateCmd(t, loraArgs(f, filepath.Join(f.root, "x"), "--ref", f.ref)...); err == nil || !strings.Contains(err.Error(), "--ref") {
		t.Errorf("--ref with LoRA: %v", err)
	}
	if _, err := runUpdateCmd(t, "--model", f.model, "--rollouts", f.rollouts, "--out", filepath.Join(f.root, "y"), "--lora-alpha", "3", "--kl-coef", "0"); err == nil || !strings.Contains(err.Error(), "--lora-rank") {
		t.Errorf("--lora-alpha without a rank: %v", err)
	}
}
