package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/safetensors"
)

// SaveOptions controls Save.
type SaveOptions struct {
	DType         safetensors.DType // F32 (default) or BF16
	MaxShardBytes int64             // 0 = one model.safetensors; otherwise shards of at most this many bytes (a bigger tensor gets a shard of its own)
	TokenizerDir  string            // copy the tokenizer files from here (a directory, or a tokenizer.json path whose siblings are copied too)
}

// TokenizerFiles are copied by Save when present; tokenizer.json is required.
var TokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
	"special_tokens_map.json", "added_tokens.json", "chat_template.jinja"}

// Save writes a complete model directory at dir: config.json (loadable by
// transformers 4.x and 5.x), generation_config.json, the weights (one file or
// shards with model.safetensors.index.json, metadata {"format":"pt"}) and
// the tokenizer files. It builds the directory beside dir and swaps it in, so
// a failure leaves an existing dir untouched. tensors must hold exactly the
// tensors of cfg.Tensors() with their element counts (lm_head.weight of a
// tied model is ignored).
func Save(dir string, cfg *Config, tensors map[string][]float32, opts SaveOptions) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%s: config: %w", dir, err)
	}
	dtype := opts.DType
	if dtype == "" {
		dtype = safetensors.F32
	}
	var dtypeName string
	switch dtype {
	case safetensors.F32:
		dtypeName = "float32"
	case safetensors.BF16:
		dtypeName = "bfloat16"
	case safetensors.F16:
		dtypeName = "float16"
	default:
		return fmt.Errorf("%s: unsupported save dtype %s (want F32, BF16 or F16)", dir, dtype)
	}
	specs := cfg.Tensors()
	want := map[string]bool{}
	for _, s := range specs {
		want[s.Name] = true
		v, ok := tensors[s.Name]
		if !ok {
			return fmt.Errorf("%s: tensor %q: missing", dir, s.Name)
		}
		if int64(len(v)) != safetensors.NumElements(s.Shape) {
			return fmt.Errorf("%s: tensor %q: %d values, shape %v needs %d", dir, s.Name, len(v), s.Shape, safetensors.NumElements(s.Shape))
		}
	}
	for name := range tensors {
		if !want[name] && !(name == "lm_head.weight" && cfg.TieWordEmbeddings) {
			return fmt.Errorf("%s: tensor %q: not a parameter of this config", dir, name)
		}
	}
	var tokFiles map[string]string
	if opts.TokenizerDir != "" {
		var err error
		if tokFiles, err = tokenizerSources(opts.TokenizerDir); err != nil {
			return err
		}
	}

	tmp, err := fileio.TempDirBeside(dir)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			fileio.RemoveTempDir(tmp)
		}
	}()

	// Shard in model order, as transformers does.
	var shards [][]safetensors.Tensor
	var cur []safetensors.Tensor
	var curBytes, total int64
	for _, s := range specs {
		t := safetensors.Tensor{Name: s.Name, DType: dtype, Shape: s.Shape, F32: tensors[s.Name]}
		n := safetensors.NumElements(s.Shape) * int64(dtype.Size())
		if opts.MaxShardBytes > 0 && len(cur) > 0 && curBytes+n > opts.MaxShardBytes {
			shards = append(shards, cur)
			cur, curBytes = nil, 0
		}
		cur = append(cur, t)
		curBytes += n
		total += n
	}
	shards = append(shards, cur)
	meta := map[string]string{"format": "pt"}
	if len(shards) == 1 {
		if err := safetensors.WriteFile(filepath.Join(tmp, SingleFile), shards[0], meta); err != nil {
			return err
		}
	} else {
		weightMap := map[string]string{}
		for i, sh := range shards {
			name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
			if err := safetensors.WriteFile(filepath.Join(tmp, name), sh, meta); err != nil {
				return err
			}
			for _, t := range sh {
				weightMap[t.Name] = name
			}
		}
		idx := map[string]any{
			"metadata":   map[string]any{"total_size": total, "total_parameters": cfg.ParamCount()},
			"weight_map": weightMap,
		}
		b, err := json.MarshalIndent(idx, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, IndexFile), append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	cj, err := cfg.ConfigJSON(dtypeName)
	if err != nil {
		return fmt.Errorf("%s: config.json: %v", dir, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "config.json"), cj, 0o644); err != nil {
		return err
	}
	gj, err := cfg.GenerationConfigJSON()
	if err != nil {
		return fmt.Errorf("%s: generation_config.json: %v", dir, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "generation_config.json"), gj, 0o644); err != nil {
		return err
	}
	for dst, src := range tokFiles {
		if err := copyFile(src, filepath.Join(tmp, dst)); err != nil {
			return err
		}
	}
	if err := fileio.ReplaceDir(tmp, dir); err != nil {
		return err
	}
	done = true
	return nil
}

// tokenizerSources maps destination names to source paths for the tokenizer
// files found at path (a directory or a tokenizer.json file).
func tokenizerSources(path string) (map[string]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	out := map[string]string{}
	dir := path
	if !st.IsDir() {
		dir = filepath.Dir(path)
		out["tokenizer.json"] = path
	}
	for _, name := range TokenizerFiles {
		if _, ok := out[name]; ok {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			out[name] = p
		}
	}
	if _, ok := out["tokenizer.json"]; !ok {
		return nil, fmt.Errorf("%s: no tokenizer.json", filepath.Join(dir, "tokenizer.json"))
	}
	return out, nil
}

// TokenizerPath resolves a --tokenizer argument (a directory or a file) to
// its tokenizer.json.
func TokenizerPath(path string) (string, error) {
	src, err := tokenizerSources(path)
	if err != nil {
		return "", err
	}
	return src["tokenizer.json"], nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("%s: %w", src, err)
	}
	return out.Close()
}

// RandomInit returns freshly initialized parameters as transformers'
// _init_weights makes them: normal(0, initializer_range) for linear and
// embedding weights (the pad_token_id row of the embedding zeroed, as
// nn.Embedding's padding_idx is), zeros for biases, ones for RMSNorm weights.
// Each tensor draws from its own PCG stream seeded by (seed, name), so the
// result depends only on the seed and the config, not on the order of work.
func RandomInit(cfg *Config, seed int64) map[string][]float32 {
	specs := cfg.Tensors()
	out := make(map[string][]float32, len(specs))
	vals := make([][]float32, len(specs))
	std := cfg.InitializerRange
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, s := range specs {
		vals[i] = make([]float32, safetensors.NumElements(s.Shape))
		wg.Add(1)
		sem <- struct{}{}
		go func(i int, s TensorSpec) {
			defer func() { <-sem; wg.Done() }()
			v := vals[i]
			switch kindOf(s.Name) {
			case kindNorm:
				for j := range v {
					v[j] = 1
				}
			case kindBias:
				// zeros
			default:
				h := fnv.New64a()
				h.Write([]byte(s.Name))
				r := rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
				for j := range v {
					v[j] = float32(r.NormFloat64() * std)
				}
				if s.Name == "model.embed_tokens.weight" && cfg.PadTokenID != nil {
					row := *cfg.PadTokenID * cfg.HiddenSize
					clear(v[row : row+cfg.HiddenSize])
				}
			}
		}(i, s)
	}
	wg.Wait()
	for i, s := range specs {
		out[s.Name] = vals[i]
	}
	return out
}

type paramKind int

const (
	kindWeight paramKind = iota
	kindBias
	kindNorm
)

func kindOf(name string) paramKind {
	switch {
	case hasSuffix(name, ".bias"):
		return kindBias
	case hasSuffix(name, "norm.weight"): // input_layernorm, post_attention_layernorm, q_norm, k_norm, model.norm
		return kindNorm
	}
	return kindWeight
}

func hasSuffix(s, suf string) bool { return len(s) >= len(suf) && s[len(s)-len(suf):] == suf }

// HumanCount formats a parameter count with a unit: 494.03M, 7.62B.
func HumanCount(n int64) string {
	x := float64(n)
	switch {
	case x >= 1e9:
		return fmt.Sprintf("%.2fB", x/1e9)
	case x >= 1e6:
		return fmt.Sprintf("%.2fM", x/1e6)
	case x >= 1e3:
		return fmt.Sprintf("%.2fK", x/1e3)
	}
	return fmt.Sprintf("%d", n)
}

var errNoVocab = errors.New("no model.vocab or added_tokens")

// TokenizerVocabSize reads a tokenizer.json minimally and returns the number
// of ids it can produce: the largest id in model.vocab (an object of token ->
// id, or a list as Unigram models have) and added_tokens, plus one.
func TokenizerVocabSize(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var tj struct {
		Model struct {
			Vocab json.RawMessage `json:"vocab"`
		} `json:"model"`
		AddedTokens []struct {
			ID *int `json:"id"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(data, &tj); err != nil {
		return 0, fmt.Errorf("%s: bad JSON: %v", path, err)
	}
	maxID := -1
	if len(tj.Model.Vocab) > 0 && string(tj.Model.Vocab) != "null" {
		var m map[string]int
		if err := json.Unmarshal(tj.Model.Vocab, &m); err == nil {
			for _, id := range m {
				if id < 0 {
					return 0, fileio.BadInput(path, 0, "model.vocab", "negative id %d", id)
				}
				maxID = max(maxID, id)
			}
		} else {
			var list []json.RawMessage
			if err := json.Unmarshal(tj.Model.Vocab, &list); err != nil {
				return 0, fileio.BadInput(path, 0, "model.vocab", "must be an object of token ids or a list")
			}
			maxID = max(maxID, len(list)-1)
		}
	}
	for i, a := range tj.AddedTokens {
		if a.ID == nil || *a.ID < 0 {
			return 0, fileio.BadInput(path, 0, "added_tokens", "entry %d has no valid id", i)
		}
		maxID = max(maxID, *a.ID)
	}
	if maxID < 0 {
		return 0, fmt.Errorf("%s: %w", path, errNoVocab)
	}
	if maxID == math.MaxInt {
		return 0, fileio.BadInput(path, 0, "model.vocab", "id too large")
	}
	return maxID + 1, nil
}
