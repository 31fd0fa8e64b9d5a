package world

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/tasks"
)

// Sizes are the task counts and model shape Write uses.
type Sizes struct {
	// SFTTasks are training tasks for the expert's demonstrations, with k
	// drawn from SFTK in turn (a mix of objective counts teaches when to
	// stop searching).
	SFTTasks int
	SFTK     []int
	// RLTasks are training tasks for the RL iterations, k = RLK.
	RLTasks int
	RLK     int
	// TestTasks per k in TestK.
	TestTasks int
	TestK     []int
	// Model shape (a Qwen2 config; vocab_size is the tokenizer's, rounded
	// up to a multiple of 64).
	Hidden, Intermediate, Layers, Heads, KVHeads int
	// Merges bounds the BPE merges of the tokenizer.
	Merges int
}

// DefaultSizes are the demo's.
func DefaultSizes() Sizes {
	return Sizes{SFTTasks: 2400, SFTK: []int{1, 2, 3, 4}, RLTasks: 512, RLK: 2, TestTasks: 32, TestK: []int{1, 2, 4, 8},
		Hidden: 128, Intermediate: 256, Layers: 2, Heads: 4, KVHeads: 2, Merges: 12000}
}

// File names inside a world directory.
const (
	CorpusFile      = "corpus.jsonl"
	TokenizerFile   = "tokenizer.json"
	TokConfigFile   = "tokenizer_config.json"
	ModelConfigFile = "model-config.json"
	ManifestFile    = "world.json"
	SFTTasksFile    = "train-sft.jsonl"
)

// RLTasksFile is the RL training tasks file for k objectives.
func RLTasksFile(k int) string { return "train-rl-k" + strconv.Itoa(k) + ".jsonl" }

// TestTasksFile is the test tasks file for k objectives.
func TestTasksFile(k int) string { return "test-k" + strconv.Itoa(k) + ".jsonl" }

// Manifest is world.json: what was generated, with which settings.
type Manifest struct {
	Config   Config            `json:"config"`
	Sizes    Sizes             `json:"sizes"`
	Passages int               `json:"passages"`
	People   int               `json:"people"`
	Test     int               `json:"test_people"`
	Vocab    int               `json:"vocab"`
	Files    map[string]string `json:"files"`
}

// TokenizerTexts are the texts the world tokenizer is trained on, with
// their weights, and the words it must not learn whole (split, for
// TokenizerJSON): the world's texts once each; the fixed protocol text
// every context repeats (system prompt, task instructions, observation
// layout, turn hints) often enough that each of its words becomes one
// token; every answer value (company, city, product) alone, so that it is
// one id with and without a leading space (the first answer follows
// "<answer>" without one); and the syllables of people's names.
//
// People's names are split: a name is the few syllable ids it is made of,
// never one id of its own. A quarter of the people are held out for the
// test tasks; as whole ids their names would be tokens the model never saw
// in training (random embeddings that every softmax pushed down), which it
// cannot copy. Made of syllables every name shares, a held-out name is a new
// sequence of well-trained ids, and copying it from the question into the
// query is the same skill as for a training name.
func (w *World) TokenizerTexts() ([]string, []int, map[string]bool) {
	texts := w.Texts()
	weights := make([]int, len(texts))
	for i := range weights {
		weights[i] = 1
	}
	fixed := []string{
		agent.Qwen25System,
		strings.NewReplacer("{tool}", "search", "{k}", "2", "{questions}", "").Replace(agent.DefaultTaskPrompt),
		"system\n", "user\n", "assistant\n", "\n",
		agent.DefaultScoreLeadIn,
		"[Turns left: 1. This is your last step: it must end with <answer>.]",
		"No passages found.",
		"Your last step did not follow the format (missing_mem). Write <mem>...</mem><think>...</think> and then exactly one action, <search>query</search> or <answer>...</answer>, with nothing after it.",
		ThinkAnswer(1), NoMemory,
	}
	for n := 2; n <= 32; n++ {
		fixed = append(fixed, "[Turns left: "+strconv.Itoa(n)+"]\n", ThinkAnswer(n))
	}
	for n := 1; n < w.Cfg.MaxTurns; n++ {
		fixed = append(fixed, ThinkSearch(n), ThinkSecondHop(n))
	}
	for i := 1; i <= 10; i++ {
		fixed = append(fixed, "\nDoc "+strconv.Itoa(i)+"(Title: ")
	}
	for _, f := range fixed {
		texts = append(texts, f)
		weights = append(weights, 50)
	}
	for _, p := range w.Corpus {
		// As an observation shows it: "Doc 1(Title: Kemi) The city of …".
		title, text, _ := strings.Cut(p.Contents, "\n")
		texts = append(texts, "(Title: "+strings.Trim(title, "\"")+") "+text)
		weights = append(weights, 1)
	}
	for _, xs := range [][]string{w.Companies, w.Cities, w.Products} {
		for _, x := range xs {
			texts = append(texts, x, " "+x)
			weights = append(weights, 20, 20)
		}
	}
	for _, sy := range personSyll {
		up := strings.ToUpper(sy[:1]) + sy[1:]
		texts = append(texts, up, " "+up, sy)
		weights = append(weights, 100000, 100000, 100000)
	}
	split := make(map[string]bool, len(w.People))
	for _, p := range w.People {
		split[p] = true
	}
	return texts, weights, split
}

// ModelConfig is a tiny Qwen2 config for a vocabulary of vocab ids with the
// given end ids.
func ModelConfig(s Sizes, vocab int, eos []int, pad int) (*checkpoint.Config, error) {
	cfg, err := checkpoint.Preset("tiny")
	if err != nil {
		return nil, err
	}
	cfg.VocabSize = (vocab + 63) / 64 * 64
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumLayers = s.Hidden, s.Intermediate, s.Layers
	cfg.NumHeads, cfg.NumKVHeads = s.Heads, s.KVHeads
	if s.Heads < 1 || s.Hidden%s.Heads != 0 {
		return nil, fmt.Errorf("world: hidden %d is not a multiple of %d heads", s.Hidden, s.Heads)
	}
	cfg.HeadDim = s.Hidden / s.Heads
	cfg.MaxPositions = 8192
	cfg.BOSTokenID = nil
	cfg.EOSTokenIDs = append([]int(nil), eos...)
	cfg.PadTokenID = &pad
	cfg.TorchDType = "float32"
	cfg.Raw = nil
	cfg.Generation = nil
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("world: model config: %w", err)
	}
	return cfg, nil
}

// Write generates the world for cfg and writes a complete world directory:
// the corpus, the task files, the tokenizer and the model config, and
// world.json. Every file is written atomically.
func Write(dir string, cfg Config, s Sizes) (*Manifest, error) {
	w, err := Generate(cfg)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	m := &Manifest{Config: cfg, Sizes: s, Passages: len(w.Corpus), People: len(w.People), Test: len(w.Test), Files: map[string]string{}}
	writeFile := func(name string, data []byte) error {
		f, err := fileio.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		defer f.Abort()
		if _, err := f.Write(data); err != nil {
			return err
		}
		return f.Commit()
	}
	var b strings.Builder
	for _, p := range w.Corpus {
		line, _ := json.Marshal(p)
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := writeFile(CorpusFile, []byte(b.String())); err != nil {
		return nil, err
	}
	m.Files[CorpusFile] = fmt.Sprintf("%d passages", len(w.Corpus))

	// Tasks. The SFT set cycles through SFTK task by task, so any prefix of
	// the file (head -n N) mixes the objective counts; each k is its own
	// stream.
	per := map[int]int{}
	for i := 0; i < s.SFTTasks; i++ {
		per[s.SFTK[i%len(s.SFTK)]]++
	}
	byK := map[int][]tasks.Task{}
	for _, k := range s.SFTK {
		if _, done := byK[k]; done {
			continue
		}
		ts, _, err := w.Tasks(Train, k, per[k], 1)
		if err != nil {
			return nil, err
		}
		byK[k] = ts
	}
	sft := make([]tasks.Task, 0, s.SFTTasks)
	for i := 0; i < s.SFTTasks; i++ {
		k := s.SFTK[i%len(s.SFTK)]
		sft = append(sft, byK[k][0])
		byK[k] = byK[k][1:]
	}
	if err := tasks.Write(filepath.Join(dir, SFTTasksFile), sft); err != nil {
		return nil, err
	}
	m.Files[SFTTasksFile] = fmt.Sprintf("%d tasks, k in %v (SFT demonstrations)", len(sft), s.SFTK)
	rl, _, err := w.Tasks(Train, s.RLK, s.RLTasks, 2)
	if err != nil {
		return nil, err
	}
	if err := tasks.Write(filepath.Join(dir, RLTasksFile(s.RLK)), rl); err != nil {
		return nil, err
	}
	m.Files[RLTasksFile(s.RLK)] = fmt.Sprintf("%d tasks, k = %d (RL prompts)", len(rl), s.RLK)
	for _, k := range s.TestK {
		ts, _, err := w.Tasks(Test, k, s.TestTasks, 3)
		if err != nil {
			return nil, err
		}
		if err := tasks.Write(filepath.Join(dir, TestTasksFile(k)), ts); err != nil {
			return nil, err
		}
		m.Files[TestTasksFile(k)] = fmt.Sprintf("%d tasks, k = %d (held-out people)", len(ts), k)
	}

	// Tokenizer and model config. A fact-shuffled variant uses the tokenizer
	// of its world (FactSeed 0), byte for byte: its merges are learned from
	// the text, which the facts change, and a model trained on several
	// variants needs one set of ids.
	tw := w
	if cfg.FactSeed != 0 {
		base := cfg
		base.FactSeed = 0
		if tw, err = Generate(base); err != nil {
			return nil, err
		}
	}
	texts, weights, split := tw.TokenizerTexts()
	tj, err := TokenizerJSON(texts, weights, s.Merges, 2, split)
	if err != nil {
		return nil, err
	}
	var probe struct {
		Model struct {
			Vocab map[string]int `json:"vocab"`
		} `json:"model"`
	}
	if err := json.Unmarshal(tj, &probe); err != nil {
		return nil, err
	}
	nBPE := len(probe.Model.Vocab)
	nAll := nBPE + len(AddedTokens())
	m.Vocab = nAll
	if err := writeFile(TokenizerFile, tj); err != nil {
		return nil, err
	}
	tc, err := TokenizerConfigJSON(nBPE)
	if err != nil {
		return nil, err
	}
	if err := writeFile(TokConfigFile, tc); err != nil {
		return nil, err
	}
	m.Files[TokenizerFile] = fmt.Sprintf("byte-level BPE, %d ids (%d merges learned from the world's text)", nAll, nBPE-256)
	// Ids: <|endoftext|> = nBPE, <|im_start|> = nBPE+1, <|im_end|> = nBPE+2.
	mc, err := ModelConfig(s, nAll, []int{nBPE + 2, nBPE}, nBPE)
	if err != nil {
		return nil, err
	}
	cj, err := mc.ConfigJSON("float32")
	if err != nil {
		return nil, err
	}
	if err := writeFile(ModelConfigFile, cj); err != nil {
		return nil, err
	}
	m.Files[ModelConfigFile] = fmt.Sprintf("Qwen2, hidden %d, %d layers, %s parameters", mc.HiddenSize, mc.NumLayers, checkpoint.HumanCount(mc.ParamCount()))
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeFile(ManifestFile, append(mj, '\n')); err != nil {
		return nil, err
	}
	return m, nil
}
