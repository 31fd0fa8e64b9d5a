// Package flags is the one definition of the flags the mempo commands share:
// each group declares its flags with defaults read from the library that owns
// the setting, and parses them once into that library's typed config.
package flags

// The --encoder group of mempo-index and mempo-serve.

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/encoder"
)

// EncoderFlags are the --encoder flags of mempo-index and mempo-serve.
func EncoderFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "encoder", Usage: "BERT-family encoder `DIR` (config.json, model.safetensors, tokenizer.json: e5, bge, contriever) to embed texts with"},
		&ucli.StringFlag{Name: "encoder-family", Usage: "e5, bge, contriever or none (default: from the encoder's name, as Search-R1)"},
		&ucli.StringFlag{Name: "pooling", Usage: "mean or cls (default: the family's: e5 mean, bge cls)"},
		&ucli.StringFlag{Name: "query-prefix", Usage: "text put before each query (default: the family's, \"query: \" for e5)"},
		&ucli.StringFlag{Name: "passage-prefix", Usage: "text put before each passage (default: the family's, \"passage: \" for e5)"},
		&ucli.IntFlag{Name: "max-length", Value: 256, Usage: "tokens per text, [CLS]/[SEP] included"},
		&ucli.IntFlag{Name: "encode-batch", Usage: "texts per encoder forward pass (default 32 on the CPU, 128 on a GPU)"},
		Device("where --encoder runs (auto: cuda when usable, else the CPU, saying why)"),
		&ucli.StringFlag{Name: "encoder-precision", Value: "fp16", Usage: "number format of the encoder on a GPU: fp16 (half weights and GEMM operands, fp32 accumulation) or fp32"},
	}
}

// LoadEncoder loads --encoder with the other encoder flags, or returns nil
// when --encoder is not given.
func LoadEncoder(c *ucli.Context) (*encoder.Encoder, error) {
	dir := c.String("encoder")
	if dir == "" {
		for _, f := range []string{"encoder-family", "pooling", "query-prefix", "passage-prefix", "device", "encoder-precision"} {
			if c.IsSet(f) {
				return nil, fmt.Errorf("--%s needs --encoder", f)
			}
		}
		return nil, nil
	}
	opt := encoder.Options{Family: c.String("encoder-family"), Pooling: encoder.Pooling(c.String("pooling")),
		MaxLength: c.Int("max-length"), BatchSize: c.Int("encode-batch"), Device: c.String("device")}
	if opt.Device == "cuda-bf16" {
		return nil, fmt.Errorf("--device cuda-bf16: the encoder has no bf16 mode; use cuda (its GPU format is --encoder-precision)")
	}
	switch p := c.String("encoder-precision"); {
	case p != "fp16" && p != "fp32":
		return nil, fmt.Errorf("--encoder-precision %q: want fp16 or fp32", p)
	case opt.Device == "cpu" && c.IsSet("encoder-precision") && p == "fp16":
		return nil, fmt.Errorf("--encoder-precision fp16 needs a GPU (--device cuda or auto); the CPU encoder is fp32")
	case opt.Device != "cpu":
		opt.Precision = encoder.Precision(p)
	}
	if c.IsSet("query-prefix") {
		s := c.String("query-prefix")
		opt.QueryPrefix = &s
	}
	if c.IsSet("passage-prefix") {
		s := c.String("passage-prefix")
		opt.PassagePrefix = &s
	}
	if opt.MaxLength <= 0 || opt.BatchSize < 0 {
		return nil, fmt.Errorf("--max-length must be positive and --encode-batch not negative")
	}
	return encoder.Load(dir, opt)
}

// DescribeEncoder is one line on what an encoder does to texts.
func DescribeEncoder(e *encoder.Encoder, dir string) string {
	return fmt.Sprintf("encoder %s: family %s, %d layers × %d, pooling %s, query prefix %q, passage prefix %q, max length %d, batch %d, device %s",
		dir, e.Family, e.Cfg.NumHiddenLayers, e.Cfg.HiddenSize, e.Pooling, e.QueryPrefix, e.PassagePrefix, e.MaxLength, e.BatchSize, e.DeviceString())
}
