package checkpoint

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/safetensors"
	"github.com/mempo/mempo/lib/tensor/half"
)

const models = "../../testdata/models"

func ip(i int) *int { return &i }

// TestFixtureConfigs hand-checks every fixture config against its config.json.
func TestFixtureConfigs(t *testing.T) {
	type want struct {
		arch               string
		nH, kv, hd         int
		tied, bias, qknorm bool
		theta              float64
		dtype              string
		weightDType        safetensors.DType
	}
	cases := map[string]want{
		"qwen2-tied-gqa1":          {ArchQwen2, 4, 4, 16, true, true, false, 10000, "float32", safetensors.F32},
		"qwen2-untied-gqa4":        {ArchQwen2, 8, 2, 8, false, true, false, 1e6, "float32", safetensors.F32},
		"qwen3-qknorm-nobias":      {ArchQwen3, 4, 1, 16, true, false, true, 1e6, "float32", safetensors.F32},
		"qwen3-qknorm-bias-untied": {ArchQwen3, 4, 2, 16, false, true, true, 10000, "float32", safetensors.F32},
		"qwen2-bf16":               {ArchQwen2, 4, 2, 16, true, true, false, 10000, "bfloat16", safetensors.BF16},
	}
	for name, w := range cases {
		dir := filepath.Join(models, name)
		c, err := LoadConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		got := want{c.Architecture, c.NumHeads, c.NumKVHeads, c.HeadDim, c.TieWordEmbeddings, c.AttentionBias, c.QKNorm, c.RopeTheta, c.TorchDType, ""}
		w2 := w
		w2.weightDType = ""
		if got != w2 {
			t.Errorf("%s: got %+v, want %+v", name, got, w2)
		}
		if c.VocabSize != 320 || c.HiddenSize != 64 || c.IntermediateSize != 160 || c.NumLayers != 2 || c.MaxPositions != 256 ||
			c.RMSNormEps != 1e-6 || c.InitializerRange != 0.02 || c.BOSTokenID != nil || c.PadTokenID != nil ||
			!reflect.DeepEqual(c.EOSTokenIDs, []int{319}) {
			t.Errorf("%s: common fields %+v", name, c)
		}
		if wantMT := map[string]string{ArchQwen2: "qwen2", ArchQwen3: "qwen3"}[w.arch]; c.ModelType != wantMT {
			t.Errorf("%s: model type %q", name, c.ModelType)
		}

		ck, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		// The parameter names are exactly those transformers reported
		// gradients for (named_parameters of the model).
		g, err := safetensors.Open(filepath.Join(dir, "golden.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		var gradNames []string
		for _, n := range g.Names() {
			if strings.HasPrefix(n, "grad.") {
				gradNames = append(gradNames, strings.TrimPrefix(n, "grad."))
				info, _ := g.Info(n)
				_, _, ok := ck.Info(strings.TrimPrefix(n, "grad."))
				if sh := specShape(c, strings.TrimPrefix(n, "grad.")); !ok || !reflect.DeepEqual(sh, info.Shape) {
					t.Errorf("%s: %s shape %v, Tensors() says %v", name, n, info.Shape, sh)
				}
			}
		}
		g.Close()
		var specNames []string
		var count int64
		for _, s := range c.Tensors() {
			specNames = append(specNames, s.Name)
			count += safetensors.NumElements(s.Shape)
			if ck.DType(s.Name) != w.weightDType {
				t.Errorf("%s: %s dtype %s", name, s.Name, ck.DType(s.Name))
			}
			v, shape, err := ck.Float32(s.Name)
			if err != nil || !reflect.DeepEqual(shape, s.Shape) || int64(len(v)) != safetensors.NumElements(s.Shape) {
				t.Errorf("%s: %s: %v %v", name, s.Name, shape, err)
			}
		}
		sort.Strings(specNames)
		if !reflect.DeepEqual(specNames, gradNames) {
			t.Errorf("%s: Tensors() %v\n golden params %v", name, specNames, gradNames)
		}
		if c.ParamCount() != count || count < 50000 {
			t.Errorf("%s: ParamCount %d, summed %d", name, c.ParamCount(), count)
		}
		if w.tied && len(ck.Ignored()) > 0 && !reflect.DeepEqual(ck.Ignored(), []string{"lm_head.weight"}) {
			t.Errorf("%s: ignored %v", name, ck.Ignored())
		}
		ck.Close()
	}
	// The sharded fixture really is spread over three files.
	ck, err := Open(filepath.Join(models, "qwen2-untied-gqa4"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	files := map[string]bool{}
	for _, s := range ck.Config.Tensors() {
		_, f, _ := ck.Info(s.Name)
		files[filepath.Base(f)] = true
	}
	if len(files) != 3 || !files["model-00003-of-00003.safetensors"] {
		t.Errorf("sharded fixture read from %v", files)
	}
}

func specShape(c *Config, name string) []int {
	for _, s := range c.Tensors() {
		if s.Name == name {
			return s.Shape
		}
	}
	return nil
}

func TestPresets(t *testing.T) {
	// Published parameter counts of the Qwen releases.
	for name, want := range map[string]int64{"qwen2.5-0.5b": 494032768, "qwen2.5-1.5b": 1543714304, "qwen2.5-7b": 7615616512} {
		c, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.ParamCount(); got != want {
			t.Errorf("%s: %d parameters, want %d", name, got, want)
		}
	}
	c, _ := Preset("qwen2.5-0.5b")
	if c.HiddenSize != 896 || c.IntermediateSize != 4864 || c.NumLayers != 24 || c.NumHeads != 14 || c.NumKVHeads != 2 ||
		c.VocabSize != 151936 || !c.TieWordEmbeddings || c.RopeTheta != 1e6 || c.MaxPositions != 32768 || c.HeadDim != 64 {
		t.Errorf("0.5b preset %+v", c)
	}
	c, _ = Preset("qwen2.5-7b")
	if c.VocabSize != 152064 || c.TieWordEmbeddings || c.NumKVHeads != 4 || c.HiddenSize != 3584 {
		t.Errorf("7b preset %+v", c)
	}
	for _, n := range Presets() {
		if _, err := Preset(n); err != nil {
			t.Errorf("preset %s: %v", n, err)
		}
	}
	if _, err := Preset("gpt2"); err == nil || !strings.Contains(err.Error(), "gpt2") {
		t.Errorf("unknown preset: %v", err)
	}
}

// copyFixture copies a fixture model directory into a temp dir.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join(models, name)
	dst := filepath.Join(t.TempDir(), name)
	os.MkdirAll(dst, 0o755)
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
	}
	return dst
}

func editConfig(t *testing.T, dir string, edit func(m map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, "config.json")
	b, _ := os.ReadFile(path)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, _ = json.Marshal(m)
	os.WriteFile(path, b, 0o644)
}

// rewriteWeights rewrites dir/model.safetensors through edit.
func rewriteWeights(t *testing.T, dir string, edit func([]safetensors.Tensor) []safetensors.Tensor) {
	t.Helper()
	path := filepath.Join(dir, SingleFile)
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for _, n := range f.Names() {
		info, _ := f.Info(n)
		raw, _ := f.Raw(n)
		ts = append(ts, safetensors.Tensor{Name: n, DType: info.DType, Shape: info.Shape, Raw: append([]byte(nil), raw...)})
	}
	f.Close()
	if err := safetensors.WriteFile(path, edit(ts), map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
}

func TestBadCheckpoints(t *testing.T) {
	const fixture = "qwen2-tied-gqa1"
	type tc struct {
		name  string
		setup func(dir string)
		want  []string
	}
	cases := []tc{
		{"llama", func(d string) {
			editConfig(t, d, func(m map[string]any) { m["architectures"] = []any{"LlamaForCausalLM"}; m["model_type"] = "llama" })
		}, []string{"config.json", `"architectures"`, "LlamaForCausalLM"}},
		{"moe", func(d string) { editConfig(t, d, func(m map[string]any) { m["num_experts"] = 8 }) }, []string{"config.json", `"num_experts"`}},
		{"rope yarn", func(d string) {
			editConfig(t, d, func(m map[string]any) { m["rope_scaling"] = map[string]any{"type": "yarn", "factor": 4.0} })
		}, []string{`"rope_scaling"`, "yarn"}},
		{"rope_parameters yarn", func(d string) {
			editConfig(t, d, func(m map[string]any) { m["rope_parameters"] = map[string]any{"rope_type": "yarn", "rope_theta": 1e6} })
		}, []string{`"rope_parameters.rope_type"`, "yarn"}},
		{"sliding window", func(d string) { editConfig(t, d, func(m map[string]any) { m["use_sliding_window"] = true }) }, []string{`"use_sliding_window"`}},
		{"layer types", func(d string) {
			editConfig(t, d, func(m map[string]any) { m["layer_types"] = []any{"full_attention", "sliding_attention"} })
		}, []string{`"layer_types"`, "sliding_attention"}},
		{"gelu", func(d string) { editConfig(t, d, func(m map[string]any) { m["hidden_act"] = "gelu" }) }, []string{`"hidden_act"`, "gelu"}},
		{"missing hidden_size", func(d string) { editConfig(t, d, func(m map[string]any) { delete(m, "hidden_size") }) }, []string{`"hidden_size"`, "missing"}},
		{"string layers", func(d string) { editConfig(t, d, func(m map[string]any) { m["num_hidden_layers"] = "2" }) }, []string{`"num_hidden_layers"`, "integer"}},
		{"kv heads", func(d string) { editConfig(t, d, func(m map[string]any) { m["num_key_value_heads"] = 3 }) }, []string{`"num_key_value_heads"`, "divide"}},
		{"eos out of vocab", func(d string) { editConfig(t, d, func(m map[string]any) { m["eos_token_id"] = 320 }) }, []string{`"eos_token_id"`, "320"}},
		{"missing tensor", func(d string) {
			rewriteWeights(t, d, func(ts []safetensors.Tensor) []safetensors.Tensor {
				var out []safetensors.Tensor
				for _, x := range ts {
					if x.Name != "model.layers.1.mlp.up_proj.weight" {
						out = append(out, x)
					}
				}
				return out
			})
		}, []string{"model.safetensors", `"model.layers.1.mlp.up_proj.weight"`, "missing"}},
		{"extra tensor", func(d string) {
			rewriteWeights(t, d, func(ts []safetensors.Tensor) []safetensors.Tensor {
				return append(ts, safetensors.Tensor{Name: "model.layers.2.mlp.up_proj.weight", DType: safetensors.F32, Shape: []int{2}, F32: []float32{1, 2}})
			})
		}, []string{"model.safetensors", `"model.layers.2.mlp.up_proj.weight"`, "unexpected"}},
		{"misshaped tensor", func(d string) {
			rewriteWeights(t, d, func(ts []safetensors.Tensor) []safetensors.Tensor {
				for i := range ts {
					if ts[i].Name == "model.layers.0.self_attn.k_proj.weight" {
						ts[i].Shape = []int{ts[i].Shape[1], ts[i].Shape[0] / 2, 2}
					}
				}
				return ts
			})
		}, []string{"model.safetensors", `"model.layers.0.self_attn.k_proj.weight"`, "shape [64 32 2], expected [64 64]"}},
		{"int weight", func(d string) {
			rewriteWeights(t, d, func(ts []safetensors.Tensor) []safetensors.Tensor {
				for i := range ts {
					if ts[i].Name == "model.norm.weight" {
						ts[i].DType = safetensors.I32
					}
				}
				return ts
			})
		}, []string{"model.safetensors", `"model.norm.weight"`, "unsupported dtype I32"}},
		{"truncated weights", func(d string) {
			p := filepath.Join(d, SingleFile)
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()-100)
		}, []string{"model.safetensors", "past the end"}},
		{"no weights", func(d string) { os.Remove(filepath.Join(d, SingleFile)) }, []string{"no model.safetensors"}},
	}
	for _, c := range cases {
		dir := copyFixture(t, fixture)
		c.setup(dir)
		ck, err := Open(dir)
		if err == nil {
			ck.Close()
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
		if !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: error %q does not name the file", c.name, err)
		}
	}

	// A tied checkpoint that also carries lm_head.weight opens; lm_head is ignored.
	dir := copyFixture(t, fixture)
	rewriteWeights(t, dir, func(ts []safetensors.Tensor) []safetensors.Tensor {
		return append(ts, safetensors.Tensor{Name: "lm_head.weight", DType: safetensors.F32, Shape: []int{320, 64}, F32: make([]float32, 320*64)})
	})
	ck, err := Open(dir)
	if err != nil {
		t.Fatalf("tied + lm_head: %v", err)
	}
	if !reflect.DeepEqual(ck.Ignored(), []string{"lm_head.weight"}) || ck.DType("lm_head.weight") != "" {
		t.Errorf("ignored %v", ck.Ignored())
	}
	ck.Close()

	// Sharded: an index that names a tensor its shard lacks.
	dir = copyFixture(t, "qwen2-untied-gqa4")
	ip := filepath.Join(dir, IndexFile)
	b, _ := os.ReadFile(ip)
	var idx map[string]any
	json.Unmarshal(b, &idx)
	idx["weight_map"].(map[string]any)["model.layers.9.mlp.up_proj.weight"] = "model-00001-of-00003.safetensors"
	b, _ = json.Marshal(idx)
	os.WriteFile(ip, b, 0o644)
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), `"model.layers.9.mlp.up_proj.weight"`) || !strings.Contains(err.Error(), "model-00001-of-00003.safetensors") {
		t.Errorf("index names a missing tensor: %v", err)
	}
	// Sharded: a shard file missing.
	dir = copyFixture(t, "qwen2-untied-gqa4")
	os.Remove(filepath.Join(dir, "model-00002-of-00003.safetensors"))
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "model-00002-of-00003.safetensors") {
		t.Errorf("missing shard: %v", err)
	}
}

func TestOlderConfigKeys(t *testing.T) {
	// Real Qwen2.5 checkpoints (transformers 4.x) write top-level rope_theta,
	// torch_dtype, a sliding_window number with use_sliding_window false,
	// rope_scaling null, and eos ids in generation_config.json.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645,
  "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02, "intermediate_size": 4864,
  "max_position_embeddings": 32768, "max_window_layers": 21, "model_type": "qwen2", "num_attention_heads": 14,
  "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.43.1",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936, "rope_scaling": null}`), 0o644)
	os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"bos_token_id": 151643, "pad_token_id": 151643,
  "do_sample": true, "eos_token_id": [151645, 151643], "repetition_penalty": 1.1, "temperature": 0.7, "top_p": 0.8, "top_k": 20}`), 0o644)
	c, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.RopeTheta != 1e6 || c.TorchDType != "bfloat16" || c.HeadDim != 64 || !reflect.DeepEqual(c.EOSTokenIDs, []int{151645, 151643}) ||
		*c.BOSTokenID != 151643 || c.PadTokenID != nil || c.ParamCount() != 494032768 {
		t.Errorf("%+v", c)
	}
	// Qwen3 without head_dim gets transformers' default of 128.
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"architectures": ["Qwen3ForCausalLM"], "hidden_size": 64,
  "intermediate_size": 128, "num_attention_heads": 2, "num_hidden_layers": 1, "vocab_size": 10}`), 0o644)
	os.Remove(filepath.Join(dir, "generation_config.json"))
	c, err = LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.HeadDim != 128 || c.NumKVHeads != 2 || c.ModelType != "qwen3" || c.AttentionBias || !c.QKNorm || c.RopeTheta != 10000 {
		t.Errorf("%+v", c)
	}
}

func TestRandomInit(t *testing.T) {
	c, err := LoadConfig(filepath.Join(models, "qwen3-qknorm-bias-untied"))
	if err != nil {
		t.Fatal(err)
	}
	c.PadTokenID = ip(5)
	a := RandomInit(c, 7)
	b := RandomInit(c, 7)
	d := RandomInit(c, 8)
	if !reflect.DeepEqual(a, b) {
		t.Error("same seed, different weights")
	}
	if reflect.DeepEqual(a["lm_head.weight"], d["lm_head.weight"]) {
		t.Error("different seeds, same weights")
	}
	if len(a) != len(c.Tensors()) {
		t.Errorf("%d tensors", len(a))
	}
	for _, s := range c.Tensors() {
		v := a[s.Name]
		if int64(len(v)) != safetensors.NumElements(s.Shape) {
			t.Fatalf("%s: %d values", s.Name, len(v))
		}
		switch {
		case strings.HasSuffix(s.Name, ".bias"):
			for _, x := range v {
				if x != 0 {
					t.Fatalf("%s not zero", s.Name)
				}
			}
		case strings.HasSuffix(s.Name, "norm.weight"):
			for _, x := range v {
				if x != 1 {
					t.Fatalf("%s not one", s.Name)
				}
			}
		default:
			var sum, sq float64
			for _, x := range v {
				sum += float64(x)
				sq += float64(x) * float64(x)
			}
			n := float64(len(v))
			mean, std := sum/n, math.Sqrt(sq/n-(sum/n)*(sum/n))
			if math.Abs(mean) > 5*0.02/math.Sqrt(n)+1e-4 || math.Abs(std-0.02) > 0.002 {
				t.Errorf("%s: mean %g std %g, want 0, 0.02", s.Name, mean, std)
			}
		}
	}
	emb := a["model.embed_tokens.weight"]
	for j := 5 * 64; j < 6*64; j++ {
		if emb[j] != 0 {
			t.Fatal("pad row not zeroed")
		}
	}
	if emb[4*64] == 0 || emb[6*64] == 0 {
		t.Error("rows beside the pad row zeroed")
	}
}

func TestSaveOpenRoundTrip(t *testing.T) {
	src := filepath.Join(models, "qwen3-qknorm-bias-untied")
	cfg, err := LoadConfig(src)
	if err != nil {
		t.Fatal(err)
	}
	weights := RandomInit(cfg, 1)
	tokDir := t.TempDir()
	os.WriteFile(filepath.Join(tokDir, "tokenizer.json"), []byte(`{"model":{"vocab":{"a":0,"b":1}},"added_tokens":[{"id":2}]}`), 0o644)
	os.WriteFile(filepath.Join(tokDir, "tokenizer_config.json"), []byte(`{"eos_token":"b"}`), 0o644)
	root := t.TempDir()

	for _, tc := range []struct {
		name   string
		opts   SaveOptions
		shards int
	}{
		{"f32", SaveOptions{TokenizerDir: tokDir}, 1},
		{"bf16", SaveOptions{DType: safetensors.BF16, TokenizerDir: filepath.Join(tokDir, "tokenizer.json")}, 1},
		{"sharded", SaveOptions{MaxShardBytes: 100 << 10}, 0},
	} {
		dir := filepath.Join(root, tc.name)
		if err := Save(dir, cfg, weights, tc.opts); err != nil {
			t.Fatal(err)
		}
		ck, err := Open(dir)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, s := range cfg.Tensors() {
			v, _, err := ck.Float32(s.Name)
			if err != nil {
				t.Fatal(err)
			}
			want := weights[s.Name]
			if tc.opts.DType == safetensors.BF16 {
				r := make([]float32, len(want))
				for i, x := range want {
					r[i] = half.BF16ToF32(half.F32ToBF16(x))
				}
				want = r
				if ck.DType(s.Name) != safetensors.BF16 {
					t.Errorf("%s: %s saved as %s", tc.name, s.Name, ck.DType(s.Name))
				}
			}
			if !reflect.DeepEqual(v, want) {
				t.Errorf("%s: %s differs after the round trip", tc.name, s.Name)
			}
		}
		got := ck.Config
		if got.Architecture != cfg.Architecture || got.NumKVHeads != cfg.NumKVHeads || got.HeadDim != cfg.HeadDim ||
			got.AttentionBias != cfg.AttentionBias || got.TieWordEmbeddings != cfg.TieWordEmbeddings || got.RopeTheta != cfg.RopeTheta ||
			!reflect.DeepEqual(got.EOSTokenIDs, cfg.EOSTokenIDs) || got.ParamCount() != cfg.ParamCount() {
			t.Errorf("%s: config changed: %+v", tc.name, got)
		}
		// Both spellings of rope theta and dtype, unknown keys kept.
		var raw map[string]any
		b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
		json.Unmarshal(b, &raw)
		wantDType := map[string]string{"f32": "float32", "bf16": "bfloat16", "sharded": "float32"}[tc.name]
		if raw["rope_theta"] != 10000.0 || raw["rope_parameters"].(map[string]any)["rope_theta"] != 10000.0 ||
			raw["dtype"] != wantDType || raw["torch_dtype"] != wantDType || raw["transformers_version"] != "5.17.0" ||
			raw["attention_dropout"] != 0.0 || raw["attention_bias"] != true {
			t.Errorf("%s: config.json %s", tc.name, b)
		}
		if tc.opts.TokenizerDir != "" {
			for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("%s: %v", tc.name, err)
				}
			}
		}
		if tc.name == "sharded" {
			var idx struct {
				Metadata  map[string]float64 `json:"metadata"`
				WeightMap map[string]string  `json:"weight_map"`
			}
			b, err := os.ReadFile(filepath.Join(dir, IndexFile))
			if err != nil {
				t.Fatal(err)
			}
			json.Unmarshal(b, &idx)
			if len(idx.WeightMap) != len(cfg.Tensors()) {
				t.Errorf("index lists %d tensors, want %d", len(idx.WeightMap), len(cfg.Tensors()))
			}
			shards := map[string]bool{}
			for _, s := range cfg.Tensors() {
				file, ok := idx.WeightMap[s.Name]
				if !ok {
					t.Errorf("index lacks %s", s.Name)
				}
				shards[file] = true
				_, path, _ := ck.Info(s.Name)
				if filepath.Base(path) != file {
					t.Errorf("%s read from %s, index says %s", s.Name, path, file)
				}
			}
			if len(shards) < 2 || idx.Metadata["total_size"] != float64(cfg.ParamCount()*4) {
				t.Errorf("%d shards, metadata %v", len(shards), idx.Metadata)
			}
			if _, err := os.Stat(filepath.Join(dir, SingleFile)); err == nil {
				t.Error("sharded save also wrote model.safetensors")
			}
			for f := range shards {
				sf, err := safetensors.Open(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				if sf.Metadata["format"] != "pt" {
					t.Errorf("%s metadata %v", f, sf.Metadata)
				}
				sf.Close()
			}
		}
		ck.Close()
	}

	// Saving again over a directory replaces it whole: no stale shard files.
	dir := filepath.Join(root, "sharded")
	if err := Save(dir, cfg, weights, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "model-") || e.Name() == IndexFile {
			t.Errorf("stale %s", e.Name())
		}
	}
	// A failing save leaves the existing directory as it was, and no debris.
	bad := map[string][]float32{}
	for k, v := range weights {
		bad[k] = v
	}
	delete(bad, "model.norm.weight")
	if err := Save(dir, cfg, bad, SaveOptions{}); err == nil || !strings.Contains(err.Error(), `"model.norm.weight"`) {
		t.Errorf("save with a missing tensor: %v", err)
	}
	bad["model.norm.weight"] = []float32{1}
	if err := Save(dir, cfg, bad, SaveOptions{}); err == nil || !strings.Contains(err.Error(), "model.norm.weight") {
		t.Errorf("save with a short tensor: %v", err)
	}
	if err := Save(dir, cfg, weights, SaveOptions{TokenizerDir: filepath.Join(root, "nothing")}); err == nil {
		t.Error("save with a missing tokenizer dir succeeded")
	}
	if ck, err := Open(dir); err != nil {
		t.Errorf("failed saves damaged the directory: %v", err)
	} else {
		ck.Close()
	}
	entries, _ = os.ReadDir(root)
	if len(entries) != 3 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("debris beside the saved dirs: %v", names)
	}
}

func TestTokenizerVocabSize(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tokenizer.json")
	os.WriteFile(p, []byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":7,"c":3}},"added_tokens":[{"id":9,"content":"<x>"}]}`), 0o644)
	if n, err := TokenizerVocabSize(p); err != nil || n != 10 {
		t.Errorf("got %d, %v; want 10", n, err)
	}
	os.WriteFile(p, []byte(`{"model":{"type":"Unigram","vocab":[["a",0.0],["b",-1.0]]}}`), 0o644)
	if n, err := TokenizerVocabSize(p); err != nil || n != 2 {
		t.Errorf("unigram: got %d, %v; want 2", n, err)
	}
	os.WriteFile(p, []byte(`{"model":{}}`), 0o644)
	if _, err := TokenizerVocabSize(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("empty tokenizer: %v", err)
	}
	real := os.Getenv("QWEN_TOKENIZER")
	if real == "" {
		real = "../../testdata/qwen3/tokenizer.json"
	}
	if _, err := os.Stat(real); err != nil {
		t.Skipf("real Qwen tokenizer not present (%v); run make fixtures-tokenizer", err)
	}
	// Qwen: 151643 BPE ids then added tokens up to 151668.
	if n, err := TokenizerVocabSize(real); err != nil || n != 151669 {
		t.Errorf("qwen tokenizer: %d, %v; want 151669", n, err)
	}
}
