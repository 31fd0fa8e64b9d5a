package main

import (
	"encoding/json"
	"fmt"
	"math"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/cmd/internal/flags"
	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/tokenizer"
)

func init() { subcommands = append(subcommands, logprobsCommand) }

var logprobsCommand = &ucli.Command{
	Name:  "logprobs",
	Usage: "teacher-forced token log-probs of each row's ids (or text) under a model",
	Description: `Each input line is a JSON object with "ids" (token ids) or "text" (encoded with the
model's tokenizer). The output line is the same object with "logprobs" added, where
logprobs[i] = log p(ids[i] | ids[:i]) at temperature 1 and logprobs[0] is null; rows given as
text also get their "ids". Rows are packed into batches of about --batch-tokens tokens.

Example:
   echo '{"ids": [1, 2, 3]}' | mempo-score logprobs --model ckpt/`,
	Flags: []ucli.Flag{
		&ucli.StringFlag{Name: "model", Required: true, Usage: "Hugging Face model directory"},
		&ucli.StringFlag{Name: "in", Value: "-", Usage: "input JSONL (- for stdin)"},
		&ucli.StringFlag{Name: "out", Value: "-", Usage: "output JSONL (- for stdout), written atomically"},
		&ucli.StringFlag{Name: "tokenizer", Usage: "tokenizer.json or its directory (default: the model directory)"},
		flags.Device(""),
		&ucli.IntFlag{Name: "batch-tokens", Value: 4096, Usage: "tokens per forward batch"},
		flags.Adapter(""),
	},
	Action: runLogprobs,
}

type lpRow struct {
	line int
	obj  map[string]json.RawMessage
	ids  []int
	text bool
}

func runLogprobs(c *ucli.Context) error {
	dir, in := c.String("model"), c.String("in")
	be, err := model.NewBackend(c.String("device"))
	if err != nil {
		return err
	}
	m, err := model.LoadAdapted(dir, c.String("adapter"), be)
	if err != nil {
		return err
	}
	tok := tokenizer.NewLazy(c.String("tokenizer"), dir)
	r, err := fileio.Open(in)
	if err != nil {
		return err
	}
	defer r.Close()
	var rows []*lpRow
	err = fileio.EachJSONL(r, in, func(line int, raw []byte) error {
		row := &lpRow{line: line}
		if err := json.Unmarshal(raw, &row.obj); err != nil {
			return fileio.BadInput(in, line, "", "not a JSON object: %v", err)
		}
		ids, isText, err := rowIDs(row.obj, tok, in, line)
		if err != nil {
			return err
		}
		for i, id := range ids {
			if id < 0 || id >= m.VocabSize() {
				return fileio.BadInput(in, line, "ids", "token id %d at position %d is outside the model's vocabulary [0, %d)", id, i, m.VocabSize())
			}
		}
		if mp := m.MaxPositions(); mp > 0 && len(ids) > mp {
			return fileio.BadInput(in, line, "ids", "%d tokens, beyond the model's max_position_embeddings %d", len(ids), mp)
		}
		row.ids, row.text = ids, isText
		rows = append(rows, row)
		return nil
	})
	if err != nil {
		return err
	}
	out, err := fileio.Create(c.String("out"))
	if err != nil {
		return err
	}
	defer out.Abort()
	w := fileio.NewJSONLWriter(out)
	budget := max(1, c.Int("batch-tokens"))
	for start := 0; start < len(rows); {
		end, tokens := start, 0
		for end < len(rows) && (end == start || tokens+len(rows[end].ids) <= budget) {
			tokens += len(rows[end].ids)
			end++
		}
		var seqs [][]int
		for _, row := range rows[start:end] {
			if len(row.ids) > 0 {
				seqs = append(seqs, row.ids)
			}
		}
		lps, err := m.LogProbs(seqs)
		if err != nil {
			return err
		}
		k := 0
		for _, row := range rows[start:end] {
			lp := make([]*float32, len(row.ids))
			if len(row.ids) > 0 {
				for i := 1; i < len(row.ids); i++ {
					v := lps[k][i]
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						return nonFinite(m, dir, in, row.line, i, v)
					}
					lp[i] = &v
				}
				k++
			}
			if err := setField(row.obj, "logprobs", lp); err != nil {
				return err
			}
			if row.text {
				if err := setField(row.obj, "ids", row.ids); err != nil {
					return err
				}
			}
			if err := w.Write(row.obj); err != nil {
				return fmt.Errorf("%s: %w", out.Path(), err)
			}
		}
		start = end
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("%s: %w", out.Path(), err)
	}
	return out.Commit()
}

func setField(obj map[string]json.RawMessage, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	obj[key] = b
	return nil
}

// rowIDs reads "ids" or, failing that, encodes "text".
func rowIDs(obj map[string]json.RawMessage, tok *tokenizer.Lazy, file string, line int) ([]int, bool, error) {
	if raw, ok := obj["ids"]; ok {
		var ids []int
		if err := json.Unmarshal(raw, &ids); err != nil {
			return nil, false, fileio.BadInput(file, line, "ids", "want an array of integer token ids")
		}
		return ids, false, nil
	}
	if raw, ok := obj["text"]; ok {
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return nil, false, fileio.BadInput(file, line, "text", "want a string")
		}
		t, err := tok.Get()
		if err != nil {
			return nil, false, fileio.BadInput(file, line, "text", "text input needs a tokenizer: %v", err)
		}
		return t.Encode(text), true, nil
	}
	return nil, false, fileio.BadInput(file, line, "", `want "ids" or "text"`)
}

// nonFinite reports a NaN or infinite log-prob, naming the model's first
// parameter that holds a NaN or an Inf when there is one (a checkpoint
// written by a diverged run).
func nonFinite(m *model.Model, dir, in string, line, pos int, v float32) error {
	for _, name := range m.ParamNames() {
		for _, x := range m.Param(name) {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("%s: parameter %s holds %v: the model is damaged (a diverged update?); log-prob of %s row %d position %d is %v", dir, name, x, in, line, pos, v)
			}
		}
	}
	return fmt.Errorf("%s: log-prob of %s row %d position %d is %v (the weights are finite: an overflow in the forward?)", dir, in, line, pos, v)
}
