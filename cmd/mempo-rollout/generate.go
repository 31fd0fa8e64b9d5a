package main

import (
	"encoding/json"
	"fmt"
	"slices"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/cmd/internal/flags"
	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/tokenizer"
)

func init() { subcommands = append(subcommands, generateCommand) }

var generateCommand = &ucli.Command{
	Name:  "generate",
	Usage: "continue each row's prompt with a model (KV cache, all rows in one batch)",
	Description: `Each input line is a JSON object with "ids" (prompt token ids), "text" (encoded with the
tokenizer) or "messages" ([{"role","content"}], rendered with the ChatML template and an
open assistant turn). The output line is the same object plus "output_ids",
"output_logprobs" (log p of each generated token under the model at temperature 1, the
policy's own probability, whatever the sampling settings), "output_sampling_logprobs" (under
the distribution it was drawn from: after temperature, top-k and top-p; 0 when greedy),
"finish_reason" ("eos", "stop" or "length") and, when a tokenizer is available,
"output_text". EOS tokens and the token completing a stop string are kept in the output.
With --n > 1 each input row gives n output rows with "sample": 0..n-1, and its prompt
is prefilled once. Row i samples with a generator seeded by (--seed, i) only, so its
output does not depend on the other rows.

Example:
   echo '{"messages": [{"role": "user", "content": "Who wrote Hamlet?"}]}' | \
     mempo-rollout generate --model ckpt/ --max-tokens 64 --temperature 0.7 --stop '</answer>'`,
	Flags: slices.Concat([]ucli.Flag{
		&ucli.StringFlag{Name: "model", Required: true, Usage: "Hugging Face model directory"},
		&ucli.StringFlag{Name: "in", Value: "-", Usage: "input JSONL (- for stdin)"},
		&ucli.StringFlag{Name: "out", Value: "-", Usage: "output JSONL (- for stdout), written atomically"},
		&ucli.StringFlag{Name: "tokenizer", Usage: "tokenizer.json or its directory (default: the model directory)"},
		flags.Device(""),
		flags.Adapter(""),
	}, flags.Sampling(flags.RowTokens, "random seed"), []ucli.Flag{
		&ucli.IntFlag{Name: "n", Value: 1, Usage: "samples per input row"},
		&ucli.BoolFlag{Name: "ignore-eos", Usage: "do not stop at the model's EOS tokens"},
		&ucli.StringSliceFlag{Name: "stop", Usage: "stop a row when its output text contains this string (repeatable)"},
		&ucli.Int64Flag{Name: "memory-budget-mb", Usage: "most MiB the KV cache may take; rows take cache as they write tokens, and one that finds none free waits (preempted) and goes on once others finish (0: 80% of the free GPU memory or of MemAvailable)"},
	}),
	Action: runGenerate,
}

func runGenerate(c *ucli.Context) error {
	dir, in := c.String("model"), c.String("in")
	maxTokens, sampling, err := flags.ParseSampling(c, flags.RowTokens)
	if err != nil {
		return err
	}
	opts := model.GenerateOptions{MaxTokens: maxTokens, Sampling: sampling, IgnoreEOS: c.Bool("ignore-eos")}
	if c.Int("n") < 1 {
		return fmt.Errorf("--n: must be at least 1")
	}
	be, err := model.NewBackend(c.String("device"))
	if err != nil {
		return err
	}
	m, err := model.LoadAdapted(dir, c.String("adapter"), be)
	if err != nil {
		return err
	}
	opts.EOS = m.EOS()
	tok := tokenizer.NewLazy(c.String("tokenizer"), dir)
	if stops := c.StringSlice("stop"); len(stops) > 0 {
		t, err := tok.Get()
		if err != nil {
			return fmt.Errorf("--stop needs a tokenizer: %v", err)
		}
		opts.StopStrings = stops
		opts.Decode = func(ids []int) string { return decode(t, ids) }
	}

	r, err := fileio.Open(in)
	if err != nil {
		return err
	}
	defer r.Close()
	var objs []map[string]json.RawMessage
	var reqs []model.Request
	err = fileio.EachJSONL(r, in, func(line int, raw []byte) error {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return fileio.BadInput(in, line, "", "not a JSON object: %v", err)
		}
		ids, field, err := promptIDs(obj, tok, in, line)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return fileio.BadInput(in, line, field, "empty prompt")
		}
		for i, id := range ids {
			if id < 0 || id >= m.VocabSize() {
				return fileio.BadInput(in, line, field, "token id %d at position %d is outside the model's vocabulary [0, %d)", id, i, m.VocabSize())
			}
		}
		objs = append(objs, obj)
		reqs = append(reqs, model.Request{Prompt: ids, N: c.Int("n"), Seed: rowSeed(c.Uint64("seed"), uint64(len(reqs)))})
		return nil
	})
	if err != nil {
		return err
	}
	if opts.CacheLimit, err = generateCacheLimit(c, m, dir, reqs, opts.MaxTokens); err != nil {
		return err
	}
	gens, err := m.Generate(reqs, opts)
	if err != nil {
		return err
	}
	out, err := fileio.Create(c.String("out"))
	if err != nil {
		return err
	}
	defer out.Abort()
	w := fileio.NewJSONLWriter(out)
	t, _ := tok.Get()
	for _, g := range gens {
		obj := map[string]json.RawMessage{}
		for k, v := range objs[g.Request] {
			obj[k] = v
		}
		set := func(k string, v any) {
			b, _ := json.Marshal(v)
			obj[k] = b
		}
		if reqs[g.Request].N > 1 {
			set("sample", g.Sample)
		}
		set("output_ids", nonNil(g.IDs))
		set("output_logprobs", nonNil(g.LogProbs))
		set("output_sampling_logprobs", nonNil(g.SampleLogProbs))
		set("finish_reason", g.Finish)
		if t != nil {
			set("output_text", decode(t, g.IDs))
		}
		if err := w.Write(obj); err != nil {
			return fmt.Errorf("%s: %w", out.Path(), err)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("%s: %w", out.Path(), err)
	}
	return out.Commit()
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// rowSeed mixes the run seed and the row number (splitmix64), so each row
// has its own stream whatever the batch holds.
func rowSeed(seed, row uint64) uint64 {
	z := seed + 0x9e3779b97f4a7c15*(row+1)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// decode turns ids into text, leaving out ids the tokenizer does not know
// (a model's embedding matrix is often padded past the tokenizer's vocabulary).
func decode(t *tokenizer.Tokenizer, ids []int) string {
	known := make([]int, 0, len(ids))
	for _, id := range ids {
		if _, err := t.TokenBytes(id); err == nil {
			known = append(known, id)
		}
	}
	s, _ := t.Decode(known)
	return s
}

// promptIDs reads "ids", or encodes "text", or renders "messages" with ChatML.
func promptIDs(obj map[string]json.RawMessage, tok *tokenizer.Lazy, file string, line int) ([]int, string, error) {
	if raw, ok := obj["ids"]; ok {
		var ids []int
		if err := json.Unmarshal(raw, &ids); err != nil {
			return nil, "ids", fileio.BadInput(file, line, "ids", "want an array of integer token ids")
		}
		return ids, "ids", nil
	}
	if raw, ok := obj["text"]; ok {
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return nil, "text", fileio.BadInput(file, line, "text", "want a string")
		}
		t, err := tok.Get()
		if err != nil {
			return nil, "text", fileio.BadInput(file, line, "text", "text input needs a tokenizer: %v", err)
		}
		return t.Encode(text), "text", nil
	}
	if raw, ok := obj["messages"]; ok {
		var msgs []tokenizer.Message
		if err := json.Unmarshal(raw, &msgs); err != nil {
			return nil, "messages", fileio.BadInput(file, line, "messages", `want an array of {"role", "content"} objects`)
		}
		t, err := tok.Get()
		if err != nil {
			return nil, "messages", fileio.BadInput(file, line, "messages", "chat input needs a tokenizer: %v", err)
		}
		chat, err := t.ChatML()
		if err != nil {
			return nil, "messages", fileio.BadInput(file, line, "messages", "%v", err)
		}
		return chat.Render(msgs, true, ""), "messages", nil
	}
	return nil, "", fileio.BadInput(file, line, "", `want "ids", "text" or "messages"`)
}
