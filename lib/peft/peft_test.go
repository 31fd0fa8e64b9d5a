package peft

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/safetensors"
)

// TestConfigFileAsPeftWritesIt: the keys and values of LoraConfig.to_dict()
// that peft reads back, and a round trip.
func TestConfigFileAsPeftWritesIt(t *testing.T) {
	c := &Config{R: 64, Alpha: 128, Dropout: 0.05, Targets: []string{"v_proj", "q_proj"}, Base: "/m/base"}
	js, err := c.configJSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"peft_type": "LORA", "r": 64.0, "lora_alpha": 128.0, "lora_dropout": 0.05, "bias": "none",
		"fan_in_fan_out": false, "task_type": "CAUSAL_LM", "base_model_name_or_path": "/m/base", "use_dora": false,
		"use_rslora": false, "inference_mode": true, "modules_to_save": nil}
	for k, v := range want {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	if tm, _ := m["target_modules"].([]any); len(tm) != 2 || tm[0] != "q_proj" || tm[1] != "v_proj" {
		t.Errorf("target_modules = %v, want [q_proj v_proj]", m["target_modules"])
	}
	if !strings.Contains(string(js), `"lora_alpha": 128,`) {
		t.Errorf("lora_alpha not written as an integer:\n%s", js)
	}
	back, err := ParseConfig("adapter_config.json", js)
	if err != nil {
		t.Fatal(err)
	}
	if back.R != 64 || back.Alpha != 128 || back.Dropout != 0.05 || back.Base != "/m/base" || !slices.Equal(back.Targets, []string{"q_proj", "v_proj"}) {
		t.Errorf("round trip gave %+v", back)
	}
}

// TestParseConfigRefuses names the field of what is not implemented.
func TestParseConfigRefuses(t *testing.T) {
	base := `"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj"]`
	for _, c := range []struct{ body, field string }{
		{`"peft_type": "IA3", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj"]`, "peft_type"},
		{base + `, "use_dora": true`, "use_dora"},
		{base + `, "bias": "all"`, "bias"},
		{base + `, "fan_in_fan_out": true`, "fan_in_fan_out"},
		{base + `, "rank_pattern": {"q_proj": 4}`, "rank_pattern"},
		{base + `, "modules_to_save": ["lm_head"]`, "modules_to_save"},
		{`"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": "all-linear"`, "target_modules"},
		{`"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["lm_head"]`, "target_modules"},
		{`"peft_type": "LORA", "r": 0, "lora_alpha": 16, "target_modules": ["q_proj"]`, "r = 0"},
		{`"peft_type": "LORA", "r": 2.5, "lora_alpha": 16, "target_modules": ["q_proj"]`, "field r"},
	} {
		_, err := ParseConfig("cfg.json", []byte("{"+c.body+"}"))
		if err == nil || !strings.Contains(err.Error(), c.field) || !strings.HasPrefix(err.Error(), "cfg.json: ") {
			t.Errorf("%s: error %v, want one naming %s", c.body, err, c.field)
		}
	}
	if _, err := ParseConfig("cfg.json", []byte("{"+base+`, "modules_to_save": null, "layers_to_transform": null, "use_rslora": true}`)); err != nil {
		t.Errorf("a plain rsLoRA config was refused: %v", err)
	}
}

// TestMergeAndFiles: Merge against a direct sum, and Read accepting the
// ".default" key spelling while refusing a wrong shape by name.
func TestMergeAndFiles(t *testing.T) {
	a := &Adapter{Config: Config{R: 2, Alpha: 3, RSLoRA: true, Targets: []string{"q_proj"}}, Tensors: map[string][]float32{}, Shapes: map[string][]int{}}
	mod := ModulePath(0, "q_proj")
	A := []float32{1, 2, 3, 4, 5, 6}    // [2, 3]
	B := []float32{1, -1, 0.5, 2, 0, 1} // [3, 2]
	a.Tensors[TensorName(mod, "A")], a.Shapes[TensorName(mod, "A")] = A, []int{2, 3}
	a.Tensors[TensorName(mod, "B")], a.Shapes[TensorName(mod, "B")] = B, []int{3, 2}
	w := []float32{0, 0, 0, 0, 0, 0, 0, 0, 1}
	base := map[string][]float32{mod + ".weight": slices.Clone(w)}
	if err := a.Merge(base, 1, map[string][]int{mod + ".weight": {3, 3}}); err != nil {
		t.Fatal(err)
	}
	s := 3 / math.Sqrt(2)
	for o := 0; o < 3; o++ {
		for i := 0; i < 3; i++ {
			var d float64
			for k := 0; k < 2; k++ {
				d += float64(B[o*2+k]) * float64(A[k*3+i])
			}
			want := float64(w[o*3+i]) + s*d
			if got := base[mod+".weight"][o*3+i]; math.Abs(float64(got)-want) > 1e-5 {
				t.Errorf("merged[%d,%d] = %v, want %v", o, i, got, want)
			}
		}
	}

	dir := filepath.Join(t.TempDir(), "ad")
	if err := Write(dir, a, nil); err != nil {
		t.Fatal(err)
	}
	// The same factors under peft's in-memory key spelling.
	ts := []safetensors.Tensor{
		{Name: "base_model.model." + mod + ".lora_A.default.weight", DType: safetensors.F32, Shape: []int{2, 3}, F32: A},
		{Name: "base_model.model." + mod + ".lora_B.default.weight", DType: safetensors.F32, Shape: []int{3, 2}, F32: B},
	}
	if err := safetensors.WriteFile(filepath.Join(dir, WeightsFile), ts, nil); err != nil {
		t.Fatal(err)
	}
	back, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Tensors[TensorName(mod, "A")], A) {
		t.Error("the .default spelling was not read")
	}
	if err := back.Check(1, func(string) []int { return []int{3, 4} }); err == nil || !strings.Contains(err.Error(), "lora_A") {
		t.Errorf("a factor of the wrong shape: %v", err)
	}
	if _, err := Read(t.TempDir()); err == nil || !strings.Contains(err.Error(), ConfigFile) {
		t.Errorf("a directory without a config: %v", err)
	}
	os.Remove(filepath.Join(dir, WeightsFile))
	if _, err := Read(dir); err == nil {
		t.Error("an adapter without weights was read")
	}
}
