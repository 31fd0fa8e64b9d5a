// Package peft reads and writes LoRA adapters in the format of Hugging Face's
// peft library: a directory with adapter_config.json (LoraConfig's fields)
// and adapter_model.safetensors, whose tensors are named
// base_model.model.<module>.lora_A.weight ([r, in]) and
// base_model.model.<module>.lora_B.weight ([out, r]) for every adapted
// linear module (model.layers.3.self_attn.q_proj, …). The adapted layer
// computes W·x + s·B·A·dropout(x) with s = lora_alpha / r (lora_alpha / √r
// with use_rslora). Merge folds an adapter into full weights.
package peft

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/safetensors"
	"github.com/mempo/mempo/lib/tensor"
)

// Files of an adapter directory.
const (
	ConfigFile  = "adapter_config.json"
	WeightsFile = "adapter_model.safetensors"
)

// Modules are the linear layers of a Qwen2-family decoder layer that an
// adapter can target, by peft's module names, with the path inside a layer.
var Modules = map[string]string{
	"q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj", "v_proj": "self_attn.v_proj", "o_proj": "self_attn.o_proj",
	"gate_proj": "mlp.gate_proj", "up_proj": "mlp.up_proj", "down_proj": "mlp.down_proj",
}

// AllTargets is every module of Modules, in layer order.
var AllTargets = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// Config is the part of peft's LoraConfig this project reads and writes.
type Config struct {
	R       int
	Alpha   float64
	Dropout float64
	Targets []string // short module names (q_proj, …), sorted
	RSLoRA  bool     // s = alpha/√r instead of alpha/r
	Base    string   // base_model_name_or_path
}

// Scale is the factor s of the adapter's product.
func (c *Config) Scale() float32 {
	if c.RSLoRA {
		return float32(c.Alpha / math.Sqrt(float64(c.R)))
	}
	return float32(c.Alpha / float64(c.R))
}

// Validate checks the values.
func (c *Config) Validate() error {
	switch {
	case c.R <= 0:
		return fmt.Errorf("lora rank r = %d: must be ≥ 1", c.R)
	case math.IsNaN(c.Alpha) || math.IsInf(c.Alpha, 0) || c.Alpha <= 0:
		return fmt.Errorf("lora_alpha %v: must be finite and > 0", c.Alpha)
	case math.IsNaN(c.Dropout) || c.Dropout < 0 || c.Dropout >= 1:
		return fmt.Errorf("lora_dropout %v: must be in [0, 1)", c.Dropout)
	case len(c.Targets) == 0:
		return fmt.Errorf("target_modules is empty")
	}
	for _, t := range c.Targets {
		if _, ok := Modules[t]; !ok {
			return fmt.Errorf("target module %q: want some of %s", t, strings.Join(AllTargets, ","))
		}
	}
	return nil
}

// ParseTargets reads a comma-separated list of module names ("" = all).
func ParseTargets(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return slices.Clone(AllTargets), nil
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if _, ok := Modules[p]; !ok {
			return nil, fmt.Errorf("lora target %q: want some of %s", p, strings.Join(AllTargets, ","))
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

// TensorName is the adapter tensor of a module ("model.layers.0.self_attn.q_proj")
// as peft saves it: factor "A" or "B".
func TensorName(module, factor string) string {
	return "base_model.model." + module + ".lora_" + factor + ".weight"
}

// ModulePath is the Hugging Face module of target t in layer l.
func ModulePath(l int, t string) string { return fmt.Sprintf("model.layers.%d.%s", l, Modules[t]) }

// configJSON is LoraConfig.to_dict() for the fields this project uses, with
// peft's defaults for the others, so peft (and tools that read the file)
// see a complete config.
func (c *Config) configJSON() ([]byte, error) {
	targets := slices.Clone(c.Targets)
	sort.Strings(targets)
	m := map[string]any{
		"alpha_pattern":           map[string]any{},
		"auto_mapping":            nil,
		"base_model_name_or_path": c.Base,
		"bias":                    "none",
		"fan_in_fan_out":          false,
		"inference_mode":          true,
		"init_lora_weights":       true,
		"layers_pattern":          nil,
		"layers_to_transform":     nil,
		"lora_alpha":              jsonNumber(c.Alpha),
		"lora_dropout":            jsonNumber(c.Dropout),
		"modules_to_save":         nil,
		"peft_type":               "LORA",
		"r":                       c.R,
		"rank_pattern":            map[string]any{},
		"revision":                nil,
		"target_modules":          targets,
		"task_type":               "CAUSAL_LM",
		"use_dora":                false,
		"use_rslora":              c.RSLoRA,
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// jsonNumber writes integral values as integers (peft writes lora_alpha 16,
// not 16.0) and others in the shortest form.
func jsonNumber(x float64) json.Number {
	if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
		return json.Number(fmt.Sprintf("%d", int64(x)))
	}
	return json.Number(fmt.Sprint(x))
}

// ParseConfig reads adapter_config.json. Features this project does not
// implement (DoRA, bias training, per-module ranks, modules_to_save,
// fan_in_fan_out, target regexes) are refused with the field named.
func ParseConfig(path string, data []byte) (*Config, error) {
	var raw map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object: %v", path, err)
	}
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%s: field %s: %s", path, field, fmt.Sprintf(format, args...))
	}
	num := func(field string) (float64, error) {
		v, ok := raw[field].(json.Number)
		if !ok {
			return 0, bad(field, "want a number, got %v", raw[field])
		}
		return v.Float64()
	}
	if p, _ := raw["peft_type"].(string); p != "LORA" {
		return nil, bad("peft_type", "%v: only LORA adapters are supported", raw["peft_type"])
	}
	c := &Config{}
	r, err := num("r")
	if err != nil {
		return nil, err
	}
	if r != math.Trunc(r) {
		return nil, bad("r", "%v is not an integer", r)
	}
	c.R = int(r)
	if c.Alpha, err = num("lora_alpha"); err != nil {
		return nil, err
	}
	if _, ok := raw["lora_dropout"]; ok && raw["lora_dropout"] != nil {
		if c.Dropout, err = num("lora_dropout"); err != nil {
			return nil, err
		}
	}
	c.Base, _ = raw["base_model_name_or_path"].(string)
	c.RSLoRA, _ = raw["use_rslora"].(bool)
	switch tm := raw["target_modules"].(type) {
	case []any:
		var names []string
		for _, v := range tm {
			s, ok := v.(string)
			if !ok {
				return nil, bad("target_modules", "entry %v is not a string", v)
			}
			names = append(names, s)
		}
		if c.Targets, err = ParseTargets(strings.Join(names, ",")); err != nil {
			return nil, bad("target_modules", "%v", err)
		}
		if len(names) == 0 {
			return nil, bad("target_modules", "empty list")
		}
	default:
		return nil, bad("target_modules", "want a list of module names (q_proj, …), got %v", raw["target_modules"])
	}
	if b, ok := raw["bias"]; ok && b != "none" {
		return nil, bad("bias", "%v: only \"none\" is supported", b)
	}
	for _, f := range []string{"fan_in_fan_out", "use_dora"} {
		if v, ok := raw[f].(bool); ok && v {
			return nil, bad(f, "true is not supported")
		}
	}
	for _, f := range []string{"rank_pattern", "alpha_pattern"} {
		if v, ok := raw[f].(map[string]any); ok && len(v) > 0 {
			return nil, bad(f, "per-module values are not supported")
		}
	}
	for _, f := range []string{"modules_to_save", "layers_to_transform"} {
		if v, ok := raw[f]; ok && v != nil {
			if l, isList := v.([]any); !isList || len(l) > 0 {
				return nil, bad(f, "%v is not supported (want null)", v)
			}
		}
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return c, nil
}

// Adapter is a LoRA adapter in memory: its config and its factors by peft
// tensor name (TensorName), row-major float32.
type Adapter struct {
	Config  Config
	Tensors map[string][]float32
	Shapes  map[string][]int
}

// Read opens an adapter directory. Tensors saved with the adapter name in
// the key (lora_A.default.weight, as some tools write) are accepted.
func Read(dir string) (*Adapter, error) {
	cp := filepath.Join(dir, ConfigFile)
	data, err := os.ReadFile(cp)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: not a peft adapter directory (no %s)", dir, ConfigFile)
		}
		return nil, err
	}
	cfg, err := ParseConfig(cp, data)
	if err != nil {
		return nil, err
	}
	wp := filepath.Join(dir, WeightsFile)
	f, err := safetensors.Open(wp)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a := &Adapter{Config: *cfg, Tensors: map[string][]float32{}, Shapes: map[string][]int{}}
	for _, name := range f.Names() {
		v, shape, err := f.Float32(name)
		if err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %v", wp, name, err)
		}
		key := strings.Replace(name, ".lora_A.default.weight", ".lora_A.weight", 1)
		key = strings.Replace(key, ".lora_B.default.weight", ".lora_B.weight", 1)
		if len(shape) != 2 {
			return nil, fmt.Errorf("%s: tensor %s: shape %v, want a matrix", wp, name, shape)
		}
		a.Tensors[key], a.Shapes[key] = v, shape
	}
	return a, nil
}

// Write writes the adapter directory atomically (built beside dir, then
// swapped in) with float32 factors, as peft saves a float32 adapter. extra
// files (name → contents) go into the same directory.
func Write(dir string, a *Adapter, extra map[string]func(path string) error) error {
	if err := a.Config.Validate(); err != nil {
		return err
	}
	tmp, err := fileio.TempDirBeside(dir)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	built := filepath.Join(tmp, "adapter")
	if err := os.MkdirAll(built, 0o755); err != nil {
		return err
	}
	js, err := a.Config.configJSON()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(built, ConfigFile), js, 0o644); err != nil {
		return err
	}
	ts := make([]safetensors.Tensor, 0, len(a.Tensors))
	for name, v := range a.Tensors {
		ts = append(ts, safetensors.Tensor{Name: name, DType: safetensors.F32, Shape: a.Shapes[name], F32: v})
	}
	if err := safetensors.WriteFile(filepath.Join(built, WeightsFile), ts, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	names := make([]string, 0, len(extra))
	for n := range extra {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := extra[n](filepath.Join(built, n)); err != nil {
			return err
		}
	}
	return fileio.ReplaceDir(built, dir)
}

// Check verifies that the adapter has both factors of every targeted module
// of a model with `layers` layers, with shapes that fit the base weight
// shapes (shape(module path) = [out, in]), and no other tensor.
func (a *Adapter) Check(layers int, shape func(module string) []int) error {
	want := map[string]bool{}
	for l := 0; l < layers; l++ {
		for _, t := range a.Config.Targets {
			mod := ModulePath(l, t)
			ws := shape(mod)
			if len(ws) != 2 {
				return fmt.Errorf("adapter: base model has no weight %s.weight", mod)
			}
			for _, f := range []struct {
				factor string
				shape  []int
			}{{"A", []int{a.Config.R, ws[1]}}, {"B", []int{ws[0], a.Config.R}}} {
				name := TensorName(mod, f.factor)
				want[name] = true
				got, ok := a.Shapes[name]
				if !ok {
					return fmt.Errorf("adapter: missing tensor %s", name)
				}
				if !slices.Equal(got, f.shape) {
					return fmt.Errorf("adapter: tensor %s has shape %v, want %v (r = %d, base weight %v)", name, got, f.shape, a.Config.R, ws)
				}
			}
		}
	}
	for name := range a.Tensors {
		if !want[name] {
			return fmt.Errorf("adapter: unexpected tensor %s (not a factor of a targeted module of this base model)", name)
		}
	}
	return nil
}

// Merge adds s·B·A into each targeted weight of base (Hugging Face names,
// [out, in] row-major float32), in place: what peft's merge_and_unload does.
func (a *Adapter) Merge(base map[string][]float32, layers int, shapes map[string][]int) error {
	shape := func(mod string) []int { return shapes[mod+".weight"] }
	if err := a.Check(layers, shape); err != nil {
		return err
	}
	s := a.Config.Scale()
	r := a.Config.R
	for l := 0; l < layers; l++ {
		for _, t := range a.Config.Targets {
			mod := ModulePath(l, t)
			ws := shape(mod)
			w := base[mod+".weight"]
			A, B := a.Tensors[TensorName(mod, "A")], a.Tensors[TensorName(mod, "B")]
			tensor.Sgemm(false, false, ws[0], ws[1], r, s, B, r, A, ws[1], 1, w, ws[1])
		}
	}
	return nil
}
