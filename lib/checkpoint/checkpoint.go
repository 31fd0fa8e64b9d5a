package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mempo/mempo/lib/safetensors"
)

// Weight file names as transformers writes them.
const (
	SingleFile = "model.safetensors"
	IndexFile  = "model.safetensors.index.json"
)

// Checkpoint is an open model directory: its config and its weight files,
// memory-mapped, with every expected tensor checked present and well shaped.
type Checkpoint struct {
	Dir    string
	Config *Config

	files   []*safetensors.File
	where   map[string]*safetensors.File // expected tensor name -> file holding it
	ignored []string                     // tensors present but not used (tied lm_head, rotary inv_freq)
}

// Open reads dir's config and opens model.safetensors or the shards listed in
// model.safetensors.index.json. Every tensor of Config.Tensors must be
// present with its shape and a float dtype (F32, BF16 or F16); any other
// tensor is an error, except lm_head.weight in a tied model and rotary
// inv_freq buffers, which are ignored. Errors name the file and the tensor.
func Open(dir string) (*Checkpoint, error) {
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	c := &Checkpoint{Dir: dir, Config: cfg, where: map[string]*safetensors.File{}}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	found := map[string]*safetensors.File{}
	indexPath := filepath.Join(dir, IndexFile)
	if data, err := os.ReadFile(indexPath); err == nil {
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(data, &idx); err != nil {
			return nil, fmt.Errorf("%s: bad JSON: %v", indexPath, err)
		}
		if len(idx.WeightMap) == 0 {
			return nil, fmt.Errorf("%s: field \"weight_map\": missing or empty", indexPath)
		}
		shards := map[string]bool{}
		for name, file := range idx.WeightMap {
			if file == "" || filepath.Base(file) != file {
				return nil, fmt.Errorf("%s: tensor %q: bad shard file name %q", indexPath, name, file)
			}
			shards[file] = true
		}
		names := make([]string, 0, len(shards))
		for s := range shards {
			names = append(names, s)
		}
		sort.Strings(names)
		for _, s := range names {
			f, err := safetensors.Open(filepath.Join(dir, s))
			if err != nil {
				return nil, err
			}
			c.files = append(c.files, f)
			for _, n := range f.Names() {
				if prev, dup := found[n]; dup {
					return nil, fmt.Errorf("%s: tensor %q: also in %s", f.Path, n, prev.Path)
				}
				if idx.WeightMap[n] != s {
					return nil, fmt.Errorf("%s: tensor %q: not listed for this shard in %s", f.Path, n, indexPath)
				}
				found[n] = f
			}
		}
		for name, s := range idx.WeightMap {
			if _, ok := found[name]; !ok {
				return nil, fmt.Errorf("%s: tensor %q: listed in %s but missing from the shard", filepath.Join(dir, s), name, IndexFile)
			}
		}
	} else if errors.Is(err, os.ErrNotExist) {
		f, err := safetensors.Open(filepath.Join(dir, SingleFile))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%s: no %s or %s", dir, SingleFile, IndexFile)
			}
			return nil, err
		}
		c.files = append(c.files, f)
		for _, n := range f.Names() {
			found[n] = f
		}
	} else {
		return nil, err
	}

	for _, spec := range cfg.Tensors() {
		f, ok := found[spec.Name]
		if !ok {
			return nil, fmt.Errorf("%s: tensor %q: missing (expected shape %v)", c.weightsName(), spec.Name, spec.Shape)
		}
		info, _ := f.Info(spec.Name)
		if !equalShape(info.Shape, spec.Shape) {
			return nil, fmt.Errorf("%s: tensor %q: shape %v, expected %v", f.Path, spec.Name, info.Shape, spec.Shape)
		}
		if !info.DType.IsFloat() {
			return nil, fmt.Errorf("%s: tensor %q: unsupported dtype %s for a weight (want F32, BF16 or F16)", f.Path, spec.Name, info.DType)
		}
		c.where[spec.Name] = f
		delete(found, spec.Name)
	}
	extra := make([]string, 0, len(found))
	for n := range found {
		extra = append(extra, n)
	}
	sort.Strings(extra)
	for _, n := range extra {
		if (n == "lm_head.weight" && cfg.TieWordEmbeddings) || strings.HasSuffix(n, ".rotary_emb.inv_freq") {
			c.ignored = append(c.ignored, n)
			continue
		}
		return nil, fmt.Errorf("%s: tensor %q: unexpected for %s with this config", found[n].Path, n, cfg.Architecture)
	}
	ok = true
	return c, nil
}

func (c *Checkpoint) weightsName() string {
	if len(c.files) == 1 {
		return c.files[0].Path
	}
	return filepath.Join(c.Dir, IndexFile)
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Float32 returns a copy of the named parameter as float32 with its shape.
func (c *Checkpoint) Float32(name string) ([]float32, []int, error) {
	f, ok := c.where[name]
	if !ok {
		return nil, nil, fmt.Errorf("%s: no parameter %q", c.Dir, name)
	}
	return f.Float32(name)
}

// DType is the stored dtype of the named parameter ("" when there is none).
func (c *Checkpoint) DType(name string) safetensors.DType {
	f, ok := c.where[name]
	if !ok {
		return ""
	}
	info, _ := f.Info(name)
	return info.DType
}

// Info describes the named parameter and names the file holding it.
func (c *Checkpoint) Info(name string) (info safetensors.TensorInfo, file string, ok bool) {
	f, ok := c.where[name]
	if !ok {
		return info, "", false
	}
	info, _ = f.Info(name)
	return info, f.Path, true
}

// Ignored lists tensors present in the files but not used by the model.
func (c *Checkpoint) Ignored() []string { return append([]string(nil), c.ignored...) }

// LoadAll reads every parameter as float32, keyed by name.
func (c *Checkpoint) LoadAll() (map[string][]float32, error) {
	out := make(map[string][]float32, len(c.where))
	for _, spec := range c.Config.Tensors() {
		v, _, err := c.Float32(spec.Name)
		if err != nil {
			return nil, err
		}
		out[spec.Name] = v
	}
	return out, nil
}

// Close unmaps the weight files.
func (c *Checkpoint) Close() error {
	var first error
	for _, f := range c.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	c.files = nil
	return first
}
