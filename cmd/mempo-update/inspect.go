package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/checkpoint"
)

var inspectCommand = &ucli.Command{
	Name:      "inspect",
	Usage:     "print a model directory's config summary, parameter count and tensor table",
	ArgsUsage: "DIR",
	Description: "Example:\n   mempo-update inspect ckpt/\n   mempo-update inspect --json ckpt/ | jq .parameters\n\n" +
		"Opening checks the whole directory: every tensor present, well shaped, nothing unexpected.",
	Flags: []ucli.Flag{
		&ucli.BoolFlag{Name: "json", Usage: "machine-readable output"},
	},
	Action: runInspect,
}

func init() { subcommands = append(subcommands, inspectCommand) }

type inspectTensor struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	File  string `json:"file"`
	Bytes int64  `json:"bytes"`
}

type inspectConfig struct {
	Architecture      string  `json:"architecture"`
	ModelType         string  `json:"model_type"`
	VocabSize         int     `json:"vocab_size"`
	HiddenSize        int     `json:"hidden_size"`
	IntermediateSize  int     `json:"intermediate_size"`
	NumLayers         int     `json:"num_hidden_layers"`
	NumHeads          int     `json:"num_attention_heads"`
	NumKVHeads        int     `json:"num_key_value_heads"`
	HeadDim           int     `json:"head_dim"`
	MaxPositions      int     `json:"max_position_embeddings"`
	RopeTheta         float64 `json:"rope_theta"`
	RMSNormEps        float64 `json:"rms_norm_eps"`
	TieWordEmbeddings bool    `json:"tie_word_embeddings"`
	QKVBias           bool    `json:"qkv_bias"`
	OProjBias         bool    `json:"o_proj_bias"`
	QKNorm            bool    `json:"qk_norm"`
	BOSTokenID        *int    `json:"bos_token_id"`
	EOSTokenIDs       []int   `json:"eos_token_ids"`
	PadTokenID        *int    `json:"pad_token_id"`
	DType             string  `json:"dtype,omitempty"`
}

type inspectReport struct {
	Dir             string          `json:"dir"`
	Config          inspectConfig   `json:"config"`
	Parameters      int64           `json:"parameters"`
	ParametersHuman string          `json:"parameters_human"`
	WeightBytes     int64           `json:"weight_bytes"`
	Files           []string        `json:"files"`
	Tokenizer       *inspectTokInfo `json:"tokenizer,omitempty"`
	Ignored         []string        `json:"ignored_tensors,omitempty"`
	Tensors         []inspectTensor `json:"tensors"`
}

type inspectTokInfo struct {
	Files []string `json:"files"`
	IDs   int      `json:"ids"`
}

func runInspect(c *ucli.Context) error {
	if c.NArg() != 1 {
		return fmt.Errorf("inspect takes one model directory, got %d arguments", c.NArg())
	}
	dir := c.Args().First()
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return err
	}
	defer ck.Close()
	cfg := ck.Config
	rep := inspectReport{
		Dir: dir,
		Config: inspectConfig{
			Architecture: cfg.Architecture, ModelType: cfg.ModelType, VocabSize: cfg.VocabSize, HiddenSize: cfg.HiddenSize,
			IntermediateSize: cfg.IntermediateSize, NumLayers: cfg.NumLayers, NumHeads: cfg.NumHeads, NumKVHeads: cfg.NumKVHeads,
			HeadDim: cfg.HeadDim, MaxPositions: cfg.MaxPositions, RopeTheta: cfg.RopeTheta, RMSNormEps: cfg.RMSNormEps,
			TieWordEmbeddings: cfg.TieWordEmbeddings, QKVBias: cfg.QKVBias(), OProjBias: cfg.OProjBias(), QKNorm: cfg.QKNorm,
			BOSTokenID: cfg.BOSTokenID, EOSTokenIDs: cfg.EOSTokenIDs, PadTokenID: cfg.PadTokenID, DType: cfg.TorchDType,
		},
		Parameters:      cfg.ParamCount(),
		ParametersHuman: checkpoint.HumanCount(cfg.ParamCount()),
		Ignored:         ck.Ignored(),
	}
	files := map[string]bool{}
	for _, s := range cfg.Tensors() {
		info, path, _ := ck.Info(s.Name)
		file := filepath.Base(path)
		files[file] = true
		rep.Tensors = append(rep.Tensors, inspectTensor{Name: s.Name, DType: string(info.DType), Shape: info.Shape, File: file, Bytes: info.End - info.Begin})
		rep.WeightBytes += info.End - info.Begin
	}
	for f := range files {
		rep.Files = append(rep.Files, f)
	}
	sort.Strings(rep.Files)
	if tok, err := checkpoint.TokenizerPath(dir); err == nil {
		ti := &inspectTokInfo{}
		for _, name := range checkpoint.TokenizerFiles {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				ti.Files = append(ti.Files, name)
			}
		}
		if ti.IDs, err = checkpoint.TokenizerVocabSize(tok); err != nil {
			return err
		}
		rep.Tokenizer = ti
	}

	w := c.App.Writer
	if c.Bool("json") {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	ic := rep.Config
	fmt.Fprintf(tw, "dir\t%s\n", dir)
	fmt.Fprintf(tw, "architecture\t%s (%s)\n", ic.Architecture, ic.ModelType)
	fmt.Fprintf(tw, "vocab_size\t%d\n", ic.VocabSize)
	fmt.Fprintf(tw, "hidden_size\t%d\n", ic.HiddenSize)
	fmt.Fprintf(tw, "intermediate_size\t%d\n", ic.IntermediateSize)
	fmt.Fprintf(tw, "layers\t%d\n", ic.NumLayers)
	fmt.Fprintf(tw, "heads\t%d query, %d key/value, head_dim %d\n", ic.NumHeads, ic.NumKVHeads, ic.HeadDim)
	fmt.Fprintf(tw, "attention\tqkv bias %v, o_proj bias %v, qk norm %v\n", ic.QKVBias, ic.OProjBias, ic.QKNorm)
	fmt.Fprintf(tw, "rope_theta\t%g\n", ic.RopeTheta)
	fmt.Fprintf(tw, "rms_norm_eps\t%g\n", ic.RMSNormEps)
	fmt.Fprintf(tw, "max_positions\t%d\n", ic.MaxPositions)
	fmt.Fprintf(tw, "tied embeddings\t%v\n", ic.TieWordEmbeddings)
	fmt.Fprintf(tw, "token ids\tbos %s, eos %v, pad %s\n", inspectOptInt(ic.BOSTokenID), ic.EOSTokenIDs, inspectOptInt(ic.PadTokenID))
	if ic.DType != "" {
		fmt.Fprintf(tw, "config dtype\t%s\n", ic.DType)
	}
	fmt.Fprintf(tw, "parameters\t%s (%s)\n", inspectCommas(rep.Parameters), rep.ParametersHuman)
	fmt.Fprintf(tw, "weights\t%s bytes in %d file(s): %s\n", inspectCommas(rep.WeightBytes), len(rep.Files), strings.Join(rep.Files, ", "))
	if rep.Tokenizer != nil {
		fmt.Fprintf(tw, "tokenizer\t%d ids (%s)\n", rep.Tokenizer.IDs, strings.Join(rep.Tokenizer.Files, ", "))
	} else {
		fmt.Fprintf(tw, "tokenizer\tnone\n")
	}
	if len(rep.Ignored) > 0 {
		fmt.Fprintf(tw, "ignored tensors\t%s\n", strings.Join(rep.Ignored, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "NAME\tDTYPE\tSHAPE\tFILE\n")
	for _, t := range rep.Tensors {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.DType, inspectShape(t.Shape), t.File)
	}
	return tw.Flush()
}

func inspectOptInt(p *int) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

func inspectShape(s []int) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func inspectCommas(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + inspectCommas(-n)
	}
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	return b.String()
}
