package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/cli"
	"github.com/mempo/mempo/lib/safetensors"
)

// runCkptCmd runs mempo-update with args as the real binary would, capturing stdout.
func runCkptCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	app := cli.App("mempo-update", "test", "mempo-update")
	app.Commands = subcommands
	var out bytes.Buffer
	app.Writer = &out
	app.ErrWriter = &out
	err := app.Run(append([]string{"mempo-update"}, args...))
	return out.String(), err
}

const initTestConfig = `{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 48, "hidden_size": 32,
 "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
 "attention_bias": true, "tie_word_embeddings": false, "rope_parameters": {"rope_theta": 5000.0, "rope_type": "default"},
 "eos_token_id": 40, "custom_key": "kept"}`

// initTestTokenizer writes a tokenizer.json with ids 0..n-1 (the last one an added token).
func initTestTokenizer(t *testing.T, dir string, n int) string {
	t.Helper()
	vocab := map[string]int{}
	for i := 0; i < n-1; i++ {
		vocab[string(rune('a'+i%26))+strings.Repeat("x", i/26)] = i
	}
	tj := map[string]any{"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{}},
		"added_tokens": []any{map[string]any{"id": n - 1, "content": "<|end|>", "special": true}}}
	b, _ := json.Marshal(tj)
	os.MkdirAll(dir, 0o755)
	p := filepath.Join(dir, "tokenizer.json")
	os.WriteFile(p, b, 0o644)
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"eos_token": "<|end|>"}`), 0o644)
	return p
}

func TestInitInspectReopen(t *testing.T) {
	root := t.TempDir()
	cfgPath := filepath.Join(root, "config.json")
	os.WriteFile(cfgPath, []byte(initTestConfig), 0o644)
	tok := initTestTokenizer(t, filepath.Join(root, "tok"), 45)
	out := filepath.Join(root, "model")

	msg, err := runCkptCmd(t, "init", "--config", cfgPath, "--tokenizer", filepath.Dir(tok), "--out", out, "--seed", "3")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "Qwen3ForCausalLM") || !strings.Contains(msg, "45 ids") {
		t.Errorf("init said %q", msg)
	}
	ck, err := checkpoint.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ck.Config
	if cfg.VocabSize != 48 || cfg.HeadDim != 8 || !cfg.AttentionBias || !cfg.QKNorm || cfg.TieWordEmbeddings || cfg.RopeTheta != 5000 ||
		!reflect.DeepEqual(cfg.EOSTokenIDs, []int{40}) || cfg.Raw["custom_key"] != "kept" {
		t.Errorf("reopened config %+v", cfg)
	}
	// The weights are RandomInit's for the seed, stored as F32.
	want := checkpoint.RandomInit(cfg, 3)
	for _, s := range cfg.Tensors() {
		v, _, err := ck.Float32(s.Name)
		if err != nil || !reflect.DeepEqual(v, want[s.Name]) || ck.DType(s.Name) != safetensors.F32 {
			t.Errorf("%s: weights differ from RandomInit(seed 3) (%v)", s.Name, err)
		}
	}
	ck.Close()
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}

	// inspect: text.
	text, err := runCkptCmd(t, "inspect", out)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"Qwen3ForCausalLM (qwen3)", "parameters", "model.layers.1.self_attn.k_norm.weight", "lm_head.weight",
		"[48, 32]", "model.safetensors", "45 ids", "qk norm true"} {
		if !strings.Contains(text, w) {
			t.Errorf("inspect output lacks %q:\n%s", w, text)
		}
	}
	// inspect: JSON, checked against the config.
	js, err := runCkptCmd(t, "inspect", "--json", out)
	if err != nil {
		t.Fatal(err)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, js)
	}
	if rep.Parameters != cfg.ParamCount() || len(rep.Tensors) != len(cfg.Tensors()) || rep.Config.HeadDim != 8 ||
		rep.WeightBytes != 4*cfg.ParamCount() || !reflect.DeepEqual(rep.Files, []string{"model.safetensors"}) || rep.Tokenizer.IDs != 45 {
		t.Errorf("inspect --json %+v", rep)
	}
	for i, s := range cfg.Tensors() {
		if rep.Tensors[i].Name != s.Name || !reflect.DeepEqual(rep.Tensors[i].Shape, s.Shape) || rep.Tensors[i].DType != "F32" {
			t.Errorf("tensor row %d: %+v, want %v", i, rep.Tensors[i], s)
		}
	}

	// A non-empty --out is refused without --force and left alone.
	before, _ := os.ReadFile(filepath.Join(out, "model.safetensors"))
	if _, err := runCkptCmd(t, "init", "--config", cfgPath, "--tokenizer", tok, "--out", out, "--seed", "4"); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("init over a checkpoint: %v", err)
	}
	// With --force, bf16: replaced whole.
	if _, err := runCkptCmd(t, "init", "--config", cfgPath, "--tokenizer", tok, "--out", out, "--seed", "4", "--dtype", "bf16", "--force"); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(out, "model.safetensors"))
	if bytes.Equal(before, after) || len(after) >= len(before) {
		t.Errorf("--force --dtype bf16 did not rewrite the weights (%d -> %d bytes)", len(before), len(after))
	}
	js, _ = runCkptCmd(t, "inspect", "--json", out)
	json.Unmarshal([]byte(js), &rep)
	if rep.Tensors[0].DType != "BF16" || rep.Config.DType != "bfloat16" {
		t.Errorf("bf16 init: %+v", rep.Tensors[0])
	}
}

func TestInitErrors(t *testing.T) {
	root := t.TempDir()
	cfgPath := filepath.Join(root, "config.json")
	os.WriteFile(cfgPath, []byte(initTestConfig), 0o644)
	bigTok := initTestTokenizer(t, filepath.Join(root, "big"), 60)
	okTok := initTestTokenizer(t, filepath.Join(root, "ok"), 48)

	// An existing model that failing --force runs must not damage.
	existing := filepath.Join(root, "existing")
	if _, err := runCkptCmd(t, "init", "--config", cfgPath, "--tokenizer", okTok, "--out", existing); err != nil {
		t.Fatal(err)
	}
	snapshot := func() map[string]string {
		m := map[string]string{}
		entries, _ := os.ReadDir(existing)
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(existing, e.Name()))
			m[e.Name()] = string(b)
		}
		return m
	}
	before := snapshot()

	badArch := filepath.Join(root, "llama.json")
	os.WriteFile(badArch, []byte(strings.Replace(initTestConfig, "Qwen3ForCausalLM", "LlamaForCausalLM", 1)), 0o644)
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"tokenizer larger than vocab", []string{"--config", cfgPath, "--tokenizer", bigTok}, []string{bigTok, "60", "48"}},
		{"unknown preset", []string{"--config", "qwen9-huge", "--tokenizer", okTok}, []string{"qwen9-huge", "unknown preset"}},
		{"bad architecture", []string{"--config", badArch, "--tokenizer", okTok}, []string{badArch, "LlamaForCausalLM"}},
		{"bad dtype", []string{"--config", cfgPath, "--tokenizer", okTok, "--dtype", "int8"}, []string{"--dtype", "int8"}},
		{"missing tokenizer", []string{"--config", cfgPath, "--tokenizer", filepath.Join(root, "none")}, []string{"none"}},
	} {
		args := append([]string{"init"}, c.args...)
		args = append(args, "--out", existing, "--force")
		_, err := runCkptCmd(t, args...)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
		if !reflect.DeepEqual(snapshot(), before) {
			t.Fatalf("%s: the existing directory was changed", c.name)
		}
	}
	entries, _ := os.ReadDir(root)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 5 { // config.json, big, ok, existing, llama.json
		t.Errorf("debris left: %v", names)
	}
	if _, err := os.Stat(filepath.Join(root, "fresh")); err == nil {
		t.Error("unexpected dir")
	}
	// The error of the real command is one line naming both sizes.
	_, err := runCkptCmd(t, "init", "--config", cfgPath, "--tokenizer", bigTok, "--out", filepath.Join(root, "fresh"))
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "has 60 token ids but the config's vocab_size is 48") {
		t.Errorf("vocab error: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "fresh")); err == nil {
		t.Error("a failed init created its --out directory")
	}
}

func TestInitPresetWithRealTokenizer(t *testing.T) {
	tok := os.Getenv("QWEN_TOKENIZER")
	if tok == "" {
		tok = "../../testdata/qwen3/tokenizer.json"
	}
	if _, err := os.Stat(tok); err != nil {
		t.Skipf("real Qwen tokenizer not present (%v); run make fixtures-tokenizer", err)
	}
	out := filepath.Join(t.TempDir(), "tiny")
	if _, err := runCkptCmd(t, "init", "--config", "tiny", "--tokenizer", tok, "--out", out, "--dtype", "bf16", "--seed", "1"); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if ck.Config.VocabSize != 151936 || ck.DType("model.embed_tokens.weight") != safetensors.BF16 {
		t.Errorf("tiny: %+v", ck.Config)
	}
	text, err := runCkptCmd(t, "inspect", out)
	if err != nil || !strings.Contains(text, "151669 ids") || !strings.Contains(text, "[151936, 64]") || !strings.Contains(text, "(9.80M)") {
		t.Errorf("inspect tiny: %v\n%s", err, text)
	}
}

func TestInspectFixtures(t *testing.T) {
	text, err := runCkptCmd(t, "inspect", "../../testdata/models/qwen2-untied-gqa4")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"123,392 (123.39K)", "3 file(s)", "model-00003-of-00003.safetensors", "heads              8 query, 2 key/value, head_dim 8"} {
		if !strings.Contains(text, w) {
			t.Errorf("inspect lacks %q:\n%s", w, text)
		}
	}
	if _, err := runCkptCmd(t, "inspect", t.TempDir()); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("inspect of an empty dir: %v", err)
	}
	if _, err := runCkptCmd(t, "inspect"); err == nil {
		t.Error("inspect without DIR succeeded")
	}
}

// TestInitFromModelDir takes --config from an existing model directory: its
// config.json (v5 keys) and generation_config.json carry over.
func TestInitFromModelDir(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "src")
	os.MkdirAll(src, 0o755)
	for _, f := range []string{"config.json", "generation_config.json"} {
		b, err := os.ReadFile(filepath.Join("../../testdata/models/qwen2-untied-gqa4", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "generation_config.json" {
			b = []byte(strings.Replace(string(b), `"use_cache": true`, `"use_cache": true, "temperature": 0.7`, 1))
		}
		os.WriteFile(filepath.Join(src, f), b, 0o644)
	}
	tok := initTestTokenizer(t, filepath.Join(root, "tok"), 320)
	out := filepath.Join(root, "out")
	if _, err := runCkptCmd(t, "init", "--config", src, "--tokenizer", tok, "--out", out); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	c := ck.Config
	if c.NumHeads != 8 || c.NumKVHeads != 2 || c.TieWordEmbeddings || c.RopeTheta != 1e6 || c.Generation["temperature"] == nil ||
		ck.DType("lm_head.weight") != safetensors.F32 {
		t.Errorf("config from a model dir: %+v", c)
	}
}
