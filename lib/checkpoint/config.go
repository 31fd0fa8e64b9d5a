// Package checkpoint reads and writes Hugging Face model directories of the
// Qwen2 family (Qwen2ForCausalLM, Qwen3ForCausalLM): config.json and
// generation_config.json, weights in one model.safetensors or in shards listed
// by model.safetensors.index.json, and the tokenizer files. It knows every
// tensor name and shape these architectures use, so a checkpoint is checked
// completely when it is opened, and it can make a randomly initialized model
// the way transformers' _init_weights does and save one that transformers
// loads.
//
// Features the model code does not implement (rope scaling, sliding-window
// attention, mixture of experts, activations other than SiLU, other
// architectures) are refused when the config is read, with an error naming
// the config field.
package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/mempo/mempo/lib/fileio"
)

// Supported architectures and their model_type.
const (
	ArchQwen2 = "Qwen2ForCausalLM"
	ArchQwen3 = "Qwen3ForCausalLM"
)

var archModelType = map[string]string{ArchQwen2: "qwen2", ArchQwen3: "qwen3"}

// Config is the part of config.json the model needs, read with transformers'
// defaults for absent fields.
type Config struct {
	Architecture string // "Qwen2ForCausalLM" or "Qwen3ForCausalLM"
	ModelType    string // "qwen2" or "qwen3"

	VocabSize, HiddenSize, IntermediateSize, NumLayers, NumHeads, NumKVHeads, HeadDim, MaxPositions int

	RopeTheta, RMSNormEps float64
	TieWordEmbeddings     bool
	// AttentionBias: Qwen2 always has biases on q, k and v (none on o_proj);
	// Qwen3 follows config "attention_bias" and then o_proj has a bias too
	// (see OProjBias).
	AttentionBias bool
	QKNorm        bool // Qwen3: RMSNorm over head_dim on q and k, before RoPE

	BOSTokenID  *int
	EOSTokenIDs []int // generation_config.json's eos ids, then config.json's not already listed
	PadTokenID  *int

	InitializerRange float64
	TorchDType       string // "dtype" (or older "torch_dtype") of config.json, e.g. "bfloat16"; may be empty

	Raw        map[string]any // the whole config.json, kept so Save writes back unknown keys unchanged
	Generation map[string]any // the whole generation_config.json (nil when absent)
}

// QKVBias reports whether q_proj, k_proj and v_proj have biases.
func (c *Config) QKVBias() bool { return c.AttentionBias }

// OProjBias reports whether o_proj has a bias (Qwen3 with attention_bias).
func (c *Config) OProjBias() bool { return c.ModelType == "qwen3" && c.AttentionBias }

// LoadConfig reads dir/config.json and, when present, dir/generation_config.json.
func LoadConfig(dir string) (*Config, error) {
	path := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(path, data)
	if err != nil {
		return nil, err
	}
	gpath := filepath.Join(dir, "generation_config.json")
	gdata, err := os.ReadFile(gpath)
	if err == nil {
		if err := cfg.applyGeneration(gpath, gdata); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// decodeObject decodes a JSON object keeping numbers exact.
func decodeObject(path string, data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: bad JSON: %v", path, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%s: not a JSON object", path)
	}
	return m, nil
}

// fields reads typed values out of a decoded JSON object and remembers the
// first error, which names the file and the field.
type fields struct {
	path string
	m    map[string]any
	err  error
}

func (f *fields) fail(field, format string, args ...any) {
	if f.err == nil {
		f.err = fileio.BadInput(f.path, 0, field, format, args...)
	}
}

func (f *fields) present(key string) bool { v, ok := f.m[key]; return ok && v != nil }

func asInt(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		// Accept integral floats such as 32768.0.
		fl, err := strconv.ParseFloat(string(n), 64)
		if err != nil || fl != math.Trunc(fl) || math.Abs(fl) > 1<<53 {
			return 0, false
		}
		return int(fl), true
	}
	return int(i), true
}

func (f *fields) int(key string, def int, required bool) int {
	v, ok := f.m[key]
	if !ok || v == nil {
		if required {
			f.fail(key, "missing")
		}
		return def
	}
	i, ok := asInt(v)
	if !ok {
		f.fail(key, "must be an integer, got %v", v)
	}
	return i
}

func (f *fields) float(key string, def float64) float64 {
	v, ok := f.m[key]
	if !ok || v == nil {
		return def
	}
	n, ok := v.(json.Number)
	if !ok {
		f.fail(key, "must be a number, got %v", v)
		return def
	}
	x, err := n.Float64()
	if err != nil {
		f.fail(key, "must be a number, got %v", v)
	}
	return x
}

func (f *fields) bool(key string, def bool) bool {
	v, ok := f.m[key]
	if !ok || v == nil {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		f.fail(key, "must be true or false, got %v", v)
	}
	return b
}

func (f *fields) string(key, def string) string {
	v, ok := f.m[key]
	if !ok || v == nil {
		return def
	}
	s, ok := v.(string)
	if !ok {
		f.fail(key, "must be a string, got %v", v)
	}
	return s
}

func (f *fields) optInt(key string) *int {
	if !f.present(key) {
		return nil
	}
	i := f.int(key, 0, false)
	return &i
}

// intList reads an int or a list of ints (as eos_token_id may be).
func (f *fields) intList(key string) []int {
	v, ok := f.m[key]
	if !ok || v == nil {
		return nil
	}
	if i, ok := asInt(v); ok {
		return []int{i}
	}
	list, ok := v.([]any)
	if !ok {
		f.fail(key, "must be an integer or a list of integers, got %v", v)
		return nil
	}
	out := make([]int, 0, len(list))
	for _, e := range list {
		i, ok := asInt(e)
		if !ok {
			f.fail(key, "must be an integer or a list of integers, got %v", v)
			return nil
		}
		out = append(out, i)
	}
	return out
}

// ParseConfig reads the contents of a config.json; path is used in errors.
// It does not call Validate.
func ParseConfig(path string, data []byte) (*Config, error) {
	m, err := decodeObject(path, data)
	if err != nil {
		return nil, err
	}
	f := &fields{path: path, m: m}
	c := &Config{Raw: m}

	c.ModelType = f.string("model_type", "")
	if v, ok := m["architectures"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok || len(list) != 1 {
			return nil, fileio.BadInput(path, 0, "architectures", "must list exactly one architecture, got %v", v)
		}
		arch, _ := list[0].(string)
		if _, ok := archModelType[arch]; !ok {
			return nil, fileio.BadInput(path, 0, "architectures", "unsupported architecture %q (supported: %s, %s)", list[0], ArchQwen2, ArchQwen3)
		}
		c.Architecture = arch
	} else {
		for a, mt := range archModelType {
			if mt == c.ModelType {
				c.Architecture = a
			}
		}
		if c.Architecture == "" {
			return nil, fileio.BadInput(path, 0, "model_type", "unsupported model_type %q and no architectures field (supported: qwen2, qwen3)", c.ModelType)
		}
	}
	if want := archModelType[c.Architecture]; c.ModelType == "" {
		c.ModelType = want
	} else if c.ModelType != want {
		return nil, fileio.BadInput(path, 0, "model_type", "%q does not match architecture %s (want %q)", c.ModelType, c.Architecture, want)
	}
	qwen3 := c.ModelType == "qwen3"

	// Features we refuse, each named by its field.
	if act := f.string("hidden_act", "silu"); act != "silu" {
		f.fail("hidden_act", "unsupported activation %q (only silu)", act)
	}
	if f.bool("use_sliding_window", false) {
		f.fail("use_sliding_window", "sliding-window attention is not supported")
	}
	if n := f.int("num_experts", 0, false); n > 0 {
		f.fail("num_experts", "mixture-of-experts models (num_experts = %d) are not supported", n)
	}
	for _, k := range []string{"num_local_experts", "moe_intermediate_size", "shared_expert_intermediate_size"} {
		if f.present(k) {
			f.fail(k, "mixture-of-experts models are not supported")
		}
	}
	if v, ok := m["layer_types"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok {
			f.fail("layer_types", "must be a list")
		}
		for i, e := range list {
			if e != "full_attention" {
				f.fail("layer_types", "layer %d is %v; only full_attention is supported", i, e)
				break
			}
		}
	}
	c.RopeTheta = f.float("rope_theta", 10000)
	if v, ok := m["rope_scaling"]; ok && v != nil {
		rs, ok := v.(map[string]any)
		if !ok {
			f.fail("rope_scaling", "must be an object or null")
		} else {
			t, _ := rs["rope_type"].(string)
			if t == "" {
				t, _ = rs["type"].(string)
			}
			if t != "default" {
				f.fail("rope_scaling", "rope scaling %q is not supported (only default rope)", t)
			}
		}
	}
	if v, ok := m["rope_parameters"]; ok && v != nil {
		rp, ok := v.(map[string]any)
		if !ok {
			f.fail("rope_parameters", "must be an object")
		} else {
			pf := &fields{path: path, m: rp}
			if t := pf.string("rope_type", "default"); t != "default" {
				f.fail("rope_parameters.rope_type", "rope type %q is not supported (only default)", t)
			}
			if pf.present("rope_theta") {
				c.RopeTheta = pf.float("rope_theta", c.RopeTheta)
			}
			if pf.err != nil {
				f.fail("rope_parameters", "%v", pf.err.(*fileio.InputError).Err)
			}
		}
	}

	c.VocabSize = f.int("vocab_size", 0, true)
	c.HiddenSize = f.int("hidden_size", 0, true)
	c.IntermediateSize = f.int("intermediate_size", 0, true)
	c.NumLayers = f.int("num_hidden_layers", 0, true)
	c.NumHeads = f.int("num_attention_heads", 0, true)
	c.NumKVHeads = f.int("num_key_value_heads", c.NumHeads, false)
	switch {
	case f.present("head_dim"):
		c.HeadDim = f.int("head_dim", 0, false)
	case qwen3:
		c.HeadDim = 128 // Qwen3Config's default
	case c.NumHeads > 0:
		c.HeadDim = c.HiddenSize / c.NumHeads
	}
	c.MaxPositions = f.int("max_position_embeddings", 32768, false)
	c.RMSNormEps = f.float("rms_norm_eps", 1e-6)
	c.TieWordEmbeddings = f.bool("tie_word_embeddings", false)
	if qwen3 {
		c.AttentionBias = f.bool("attention_bias", false)
		c.QKNorm = true
	} else {
		c.AttentionBias = true
	}
	c.InitializerRange = f.float("initializer_range", 0.02)
	c.BOSTokenID = f.optInt("bos_token_id")
	c.PadTokenID = f.optInt("pad_token_id")
	c.EOSTokenIDs = f.intList("eos_token_id")
	c.TorchDType = f.string("dtype", "")
	if c.TorchDType == "" {
		c.TorchDType = f.string("torch_dtype", "")
	}
	if f.err != nil {
		return nil, f.err
	}
	return c, nil
}

func (c *Config) applyGeneration(path string, data []byte) error {
	m, err := decodeObject(path, data)
	if err != nil {
		return err
	}
	f := &fields{path: path, m: m}
	eos := f.intList("eos_token_id")
	if f.err != nil {
		return f.err
	}
	c.Generation = m
	if len(eos) > 0 {
		merged := append([]int(nil), eos...)
		for _, id := range c.EOSTokenIDs {
			if !containsInt(merged, id) {
				merged = append(merged, id)
			}
		}
		c.EOSTokenIDs = merged
	}
	return nil
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// Validate checks the sizes for consistency; errors name the field.
func (c *Config) Validate() error {
	if _, ok := archModelType[c.Architecture]; !ok {
		return fmt.Errorf("field \"architectures\": unsupported architecture %q", c.Architecture)
	}
	if archModelType[c.Architecture] != c.ModelType {
		return fmt.Errorf("field \"model_type\": %q does not match %s", c.ModelType, c.Architecture)
	}
	pos := []struct {
		field string
		v     int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumLayers}, {"num_attention_heads", c.NumHeads},
		{"num_key_value_heads", c.NumKVHeads}, {"head_dim", c.HeadDim}, {"max_position_embeddings", c.MaxPositions},
	}
	for _, p := range pos {
		if p.v <= 0 {
			return fmt.Errorf("field %q: must be positive, got %d", p.field, p.v)
		}
	}
	if c.NumHeads%c.NumKVHeads != 0 {
		return fmt.Errorf("field \"num_key_value_heads\": %d does not divide num_attention_heads %d", c.NumKVHeads, c.NumHeads)
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("field \"head_dim\": %d must be even for rotary embeddings", c.HeadDim)
	}
	if c.ModelType == "qwen2" && c.HeadDim*c.NumHeads != c.HiddenSize {
		if _, explicit := c.Raw["head_dim"]; !explicit {
			return fmt.Errorf("field \"num_attention_heads\": %d does not divide hidden_size %d", c.NumHeads, c.HiddenSize)
		}
	}
	if !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0) {
		return fmt.Errorf("field \"rope_theta\": must be positive, got %v", c.RopeTheta)
	}
	if !(c.RMSNormEps > 0) {
		return fmt.Errorf("field \"rms_norm_eps\": must be positive, got %v", c.RMSNormEps)
	}
	if !(c.InitializerRange >= 0) {
		return fmt.Errorf("field \"initializer_range\": must not be negative, got %v", c.InitializerRange)
	}
	check := func(field string, id int) error {
		if id < 0 || id >= c.VocabSize {
			return fmt.Errorf("field %q: token id %d outside the vocabulary [0, %d)", field, id, c.VocabSize)
		}
		return nil
	}
	if c.BOSTokenID != nil {
		if err := check("bos_token_id", *c.BOSTokenID); err != nil {
			return err
		}
	}
	if c.PadTokenID != nil {
		if err := check("pad_token_id", *c.PadTokenID); err != nil {
			return err
		}
	}
	for _, id := range c.EOSTokenIDs {
		if err := check("eos_token_id", id); err != nil {
			return err
		}
	}
	return nil
}

// TensorSpec is the name and shape of one parameter tensor.
type TensorSpec struct {
	Name  string
	Shape []int
}

// Tensors lists every parameter tensor with its Hugging Face name and shape,
// in the order of the model: embeddings, each layer, final norm, lm_head
// (only when the embeddings are untied).
func (c *Config) Tensors() []TensorSpec {
	H, I, V, hd := c.HiddenSize, c.IntermediateSize, c.VocabSize, c.HeadDim
	q, kv := c.NumHeads*hd, c.NumKVHeads*hd
	out := []TensorSpec{{"model.embed_tokens.weight", []int{V, H}}}
	for l := 0; l < c.NumLayers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		add := func(name string, shape ...int) { out = append(out, TensorSpec{p + name, shape}) }
		add("input_layernorm.weight", H)
		add("self_attn.q_proj.weight", q, H)
		if c.QKVBias() {
			add("self_attn.q_proj.bias", q)
		}
		add("self_attn.k_proj.weight", kv, H)
		if c.QKVBias() {
			add("self_attn.k_proj.bias", kv)
		}
		add("self_attn.v_proj.weight", kv, H)
		if c.QKVBias() {
			add("self_attn.v_proj.bias", kv)
		}
		add("self_attn.o_proj.weight", H, q)
		if c.OProjBias() {
			add("self_attn.o_proj.bias", H)
		}
		if c.QKNorm {
			add("self_attn.q_norm.weight", hd)
			add("self_attn.k_norm.weight", hd)
		}
		add("post_attention_layernorm.weight", H)
		add("mlp.gate_proj.weight", I, H)
		add("mlp.up_proj.weight", I, H)
		add("mlp.down_proj.weight", H, I)
	}
	out = append(out, TensorSpec{"model.norm.weight", []int{H}})
	if !c.TieWordEmbeddings {
		out = append(out, TensorSpec{"lm_head.weight", []int{V, H}})
	}
	return out
}

// ParamCount is the number of parameters (tied embeddings counted once).
func (c *Config) ParamCount() int64 {
	var n int64
	for _, t := range c.Tensors() {
		p := int64(1)
		for _, d := range t.Shape {
			p *= int64(d)
		}
		n += p
	}
	return n
}

// Clone returns a deep copy (Raw and Generation included).
func (c *Config) Clone() *Config {
	d := *c
	d.EOSTokenIDs = append([]int(nil), c.EOSTokenIDs...)
	if c.BOSTokenID != nil {
		v := *c.BOSTokenID
		d.BOSTokenID = &v
	}
	if c.PadTokenID != nil {
		v := *c.PadTokenID
		d.PadTokenID = &v
	}
	d.Raw = cloneJSON(c.Raw)
	d.Generation = cloneJSON(c.Generation)
	return &d
}

func cloneJSON(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return cloneJSON(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneValue(e)
		}
		return out
	}
	return v
}

// ConfigJSON renders config.json for this config with weights stored as
// dtype ("float32" or "bfloat16"): the keys transformers needs (both the v5
// "rope_parameters" and the older top-level "rope_theta", both "dtype" and
// "torch_dtype") over the unknown keys of Raw, which are kept.
func (c *Config) ConfigJSON(dtype string) ([]byte, error) {
	m := cloneJSON(c.Raw)
	if m == nil {
		m = map[string]any{}
	}
	m["architectures"] = []any{c.Architecture}
	m["model_type"] = c.ModelType
	m["vocab_size"] = c.VocabSize
	m["hidden_size"] = c.HiddenSize
	m["intermediate_size"] = c.IntermediateSize
	m["num_hidden_layers"] = c.NumLayers
	m["num_attention_heads"] = c.NumHeads
	m["num_key_value_heads"] = c.NumKVHeads
	if _, had := m["head_dim"]; had || c.ModelType == "qwen3" || c.HeadDim*c.NumHeads != c.HiddenSize {
		m["head_dim"] = c.HeadDim
	}
	m["max_position_embeddings"] = c.MaxPositions
	m["rope_theta"] = floatJSON(c.RopeTheta)
	m["rope_parameters"] = map[string]any{"rope_theta": floatJSON(c.RopeTheta), "rope_type": "default"}
	m["rms_norm_eps"] = floatJSON(c.RMSNormEps)
	m["tie_word_embeddings"] = c.TieWordEmbeddings
	if c.ModelType == "qwen3" {
		m["attention_bias"] = c.AttentionBias
	}
	m["hidden_act"] = "silu"
	m["initializer_range"] = floatJSON(c.InitializerRange)
	m["use_sliding_window"] = false
	if _, had := m["sliding_window"]; !had {
		m["sliding_window"] = nil
	}
	if _, had := m["max_window_layers"]; !had {
		m["max_window_layers"] = c.NumLayers
	}
	lt := make([]any, c.NumLayers)
	for i := range lt {
		lt[i] = "full_attention"
	}
	m["layer_types"] = lt
	m["bos_token_id"] = intPtrJSON(c.BOSTokenID)
	m["pad_token_id"] = intPtrJSON(c.PadTokenID)
	switch {
	case len(c.EOSTokenIDs) == 0:
		m["eos_token_id"] = nil
	default:
		// config.json keeps its own eos id when it is still one of ours.
		if old, ok := asInt(m["eos_token_id"]); ok && containsInt(c.EOSTokenIDs, old) {
			m["eos_token_id"] = old
		} else {
			m["eos_token_id"] = c.EOSTokenIDs[0]
		}
	}
	if dtype != "" {
		m["dtype"] = dtype
		m["torch_dtype"] = dtype
	}
	if _, ok := m["use_cache"]; !ok {
		m["use_cache"] = true
	}
	delete(m, "rope_scaling")
	return marshalIndent(m)
}

// GenerationConfigJSON renders generation_config.json: the keys of
// Generation, with bos/eos/pad ids from the config.
func (c *Config) GenerationConfigJSON() ([]byte, error) {
	m := cloneJSON(c.Generation)
	if m == nil {
		m = map[string]any{}
	}
	if c.BOSTokenID != nil {
		m["bos_token_id"] = *c.BOSTokenID
	}
	if c.PadTokenID != nil {
		m["pad_token_id"] = *c.PadTokenID
	}
	switch len(c.EOSTokenIDs) {
	case 0:
		delete(m, "eos_token_id")
	case 1:
		m["eos_token_id"] = c.EOSTokenIDs[0]
	default:
		ids := make([]any, len(c.EOSTokenIDs))
		for i, id := range c.EOSTokenIDs {
			ids[i] = id
		}
		m["eos_token_id"] = ids
	}
	return marshalIndent(m)
}

// floatJSON spells a float the way Python's json does (1000000.0, 1e-06),
// so Python reads it back as a float, not an int.
func floatJSON(x float64) json.Number {
	var s string
	if ax := math.Abs(x); ax != 0 && (ax < 1e-4 || ax >= 1e16) {
		s = strconv.FormatFloat(x, 'e', -1, 64)
	} else {
		s = strconv.FormatFloat(x, 'f', -1, 64)
	}
	if !strings.ContainsAny(s, ".eEnN") {
		s += ".0"
	}
	return json.Number(s)
}

func intPtrJSON(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func marshalIndent(m map[string]any) ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Presets names the built-in configs.
func Presets() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

type preset struct {
	arch                            string
	V, H, I, L, nH, nKV, hd, maxPos int
	tied                            bool
	theta                           float64
	eos                             []int
}

// The real shapes of the Hugging Face Qwen releases (Instruct token ids:
// bos <|endoftext|> 151643, eos <|im_end|> 151645 then 151643, generation
// pad 151643), and a
// tiny Qwen2 with the same vocabulary for tests and demos.
var presets = map[string]preset{
	"tiny":         {ArchQwen2, 151936, 64, 128, 2, 4, 2, 16, 32768, true, 1e6, nil},
	"qwen2.5-0.5b": {ArchQwen2, 151936, 896, 4864, 24, 14, 2, 64, 32768, true, 1e6, nil},
	"qwen2.5-1.5b": {ArchQwen2, 151936, 1536, 8960, 28, 12, 2, 128, 32768, true, 1e6, nil},
	"qwen2.5-3b":   {ArchQwen2, 151936, 2048, 11008, 36, 16, 2, 128, 32768, true, 1e6, nil},
	"qwen2.5-7b":   {ArchQwen2, 152064, 3584, 18944, 28, 28, 4, 128, 32768, false, 1e6, nil},
	"qwen3-0.6b":   {ArchQwen3, 151936, 1024, 3072, 28, 16, 8, 128, 40960, true, 1e6, nil},
	"qwen3-1.7b":   {ArchQwen3, 151936, 2048, 6144, 28, 16, 8, 128, 40960, true, 1e6, nil},
}

// Preset returns a new config for a built-in name (see Presets).
func Preset(name string) (*Config, error) {
	p, ok := presets[name]
	if !ok {
		return nil, fmt.Errorf("unknown preset %q (known: %v)", name, Presets())
	}
	bos := 151643
	c := &Config{
		Architecture: p.arch, ModelType: archModelType[p.arch],
		VocabSize: p.V, HiddenSize: p.H, IntermediateSize: p.I, NumLayers: p.L,
		NumHeads: p.nH, NumKVHeads: p.nKV, HeadDim: p.hd, MaxPositions: p.maxPos,
		RopeTheta: p.theta, RMSNormEps: 1e-6, TieWordEmbeddings: p.tied,
		BOSTokenID: &bos, EOSTokenIDs: []int{151645, 151643},
		InitializerRange: 0.02, TorchDType: "bfloat16",
	}
	if c.ModelType == "qwen3" {
		c.QKNorm = true
		c.AttentionBias = false
	} else {
		c.AttentionBias = true
	}
	// As Qwen ships it, pad_token_id is set in generation_config.json only: in
	// config.json it would make the embedding row a padding_idx that
	// transformers never trains.
	c.Generation = map[string]any{"pad_token_id": 151643, "bos_token_id": bos}
	c.Raw = map[string]any{"attention_dropout": json.Number("0.0"), "use_cache": true}
	if c.ModelType == "qwen2" {
		c.Raw["max_window_layers"] = c.NumLayers
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("preset %s: %w", name, err)
	}
	return c, nil
}
