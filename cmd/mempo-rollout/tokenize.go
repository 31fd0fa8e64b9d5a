package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/tokenizer"
)

func init() { subcommands = append(subcommands, tokenizeCommand) }

var tokenizeCommand = &ucli.Command{
	Name:  "tokenize",
	Usage: "encode JSONL {\"text\"} rows to token ids, or decode {\"ids\"} rows to text",
	Description: `Each input line is a JSON object. Encoding reads "text" and adds "ids" (special tokens
written in the text, such as <|im_end|>, are matched as HF tokenizers does with
add_special_tokens=False). With --decode it reads "ids" and adds "text". Every other field
is kept as it is, in its place.

Example:
   echo '{"text": "<|im_start|>user\nWho wrote Hamlet?<|im_end|>", "id": 7}' | \
     mempo-rollout tokenize --tokenizer ckpt/
   mempo-rollout tokenize --tokenizer ckpt/tokenizer.json --decode --in ids.jsonl --out text.jsonl`,
	Flags: []ucli.Flag{
		&ucli.StringFlag{Name: "tokenizer", Required: true, Usage: "tokenizer.json or a model directory holding it"},
		&ucli.BoolFlag{Name: "decode", Usage: `decode "ids" to "text" instead of encoding`},
		&ucli.StringFlag{Name: "in", Value: "-", Usage: "input JSONL (- for stdin)"},
		&ucli.StringFlag{Name: "out", Value: "-", Usage: "output JSONL (- for stdout), written atomically"},
	},
	Action: runTokenize,
}

func runTokenize(c *ucli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("tokenize takes no arguments, got %q", c.Args().First())
	}
	tok, err := tokenizer.Load(c.String("tokenizer"))
	if err != nil {
		return err
	}
	inPath, outPath := c.String("in"), c.String("out")
	in, err := fileio.Open(inPath)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := fileio.Create(outPath)
	if err != nil {
		return err
	}
	defer out.Abort()
	name := inPath
	if name == "-" {
		name = "stdin"
	}
	if err := tokenizeStream(tok, c.Bool("decode"), in, name, out); err != nil {
		return err
	}
	return out.Commit()
}

// tokenizeStream encodes (or decodes) every line of r into w.
func tokenizeStream(tok *tokenizer.Tokenizer, decode bool, r io.Reader, file string, w io.Writer) error {
	jw := fileio.NewJSONLWriter(w)
	var ids []int
	err := fileio.EachJSONL(r, file, func(line int, raw []byte) error {
		fields, err := tokObjectFields(raw)
		if err != nil {
			return fileio.BadInput(file, line, "", "not a JSON object: %v", err)
		}
		var key string
		var val []byte
		if decode {
			src, ok := fields.get("ids")
			if !ok {
				return fileio.BadInput(file, line, "ids", `missing (with --decode each line needs "ids")`)
			}
			ids = ids[:0]
			if err := json.Unmarshal(src, &ids); err != nil {
				return fileio.BadInput(file, line, "ids", "want an array of integer token ids")
			}
			text, err := tok.Decode(ids)
			if err != nil {
				return fileio.BadInput(file, line, "ids", "%v", err)
			}
			key = "text"
			val = tokJSONString(text)
		} else {
			src, ok := fields.get("text")
			if !ok {
				return fileio.BadInput(file, line, "text", `missing (each line needs "text"; use --decode for "ids")`)
			}
			var text string
			if err := json.Unmarshal(src, &text); err != nil {
				return fileio.BadInput(file, line, "text", "want a string")
			}
			ids = tok.AppendEncode(ids[:0], text)
			b := make([]byte, 0, 8*len(ids)+2)
			b = append(b, '[')
			for i, id := range ids {
				if i > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendInt(b, int64(id), 10)
			}
			val = append(b, ']')
			key = "ids"
		}
		return jw.Write(json.RawMessage(fields.set(key, val).marshal()))
	})
	if err != nil {
		return err
	}
	return jw.Flush()
}

// tokField is one member of a JSON object, its value kept byte for byte.
type tokField struct {
	key string
	val json.RawMessage
}

type tokFieldList []tokField

// tokObjectFields splits a JSON object into its members, in order.
func tokObjectFields(raw []byte) (tokFieldList, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, errors.New("the line is not an object")
	}
	var fs tokFieldList
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		fs = append(fs, tokField{t.(string), v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("text after the object")
	}
	return fs, nil
}

func (fs tokFieldList) get(key string) (json.RawMessage, bool) {
	for _, f := range fs {
		if f.key == key {
			return f.val, true
		}
	}
	return nil, false
}

// set replaces key's value where it is, or appends it.
func (fs tokFieldList) set(key string, val []byte) tokFieldList {
	for i := range fs {
		if fs[i].key == key {
			fs[i].val = val
			return fs
		}
	}
	return append(fs, tokField{key, val})
}

func (fs tokFieldList) marshal() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range fs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(tokJSONString(f.key))
		b.WriteByte(':')
		b.Write(f.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// tokJSONString encodes s as a JSON string without escaping <, > and &, which
// special tokens such as <|im_end|> are full of.
func tokJSONString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return bytes.TrimRight(b.Bytes(), "\n")
}
