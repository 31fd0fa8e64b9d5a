package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// Options tune loading.
type Options struct {
	// Impl selects the regex implementation of Split pre-tokenizers.
	Impl Impl
}

// Load reads a Hugging Face tokenizer.json. path is the file itself or a
// model directory that contains one.
func Load(path string) (*Tokenizer, error) { return LoadWith(path, Options{}) }

// File is the tokenizer.json that path names: path itself, or the one in
// it when path is a (model) directory, as Load reads it.
func File(path string) string {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return filepath.Join(path, "tokenizer.json")
	}
	return path
}

// LoadWith is Load with options.
func LoadWith(path string, opt Options) (*Tokenizer, error) {
	path = File(path)
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t, err := Parse(data, opt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

type fileJSON struct {
	AddedTokens   []AddedToken    `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
}

// component is the common shape of normalizer/pre_tokenizer/decoder entries.
type component struct {
	Type string `json:"type"`
	// Sequence members.
	Normalizers   []json.RawMessage `json:"normalizers"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Decoders      []json.RawMessage `json:"decoders"`
	Processors    []json.RawMessage `json:"processors"`
	// Split.
	Pattern  *struct{ Regex, String *string } `json:"pattern"`
	Behavior string                           `json:"behavior"`
	Invert   bool                             `json:"invert"`
	// ByteLevel.
	AddPrefixSpace bool  `json:"add_prefix_space"`
	UseRegex       *bool `json:"use_regex"`
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// jsonError turns encoding/json errors into a line that says where.
func jsonError(data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) && se.Error() == "unexpected end of JSON input" {
		return fmt.Errorf("invalid JSON: unexpected end of input at byte %d (truncated file?)", se.Offset)
	}
	if errors.As(err, &se) {
		line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
		return fmt.Errorf("invalid JSON at byte %d (line %d): %v", se.Offset, line, se)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("field %q: JSON %s where %s was expected", te.Field, te.Value, te.Type)
	}
	if err.Error() == "unexpected end of JSON input" {
		return errors.New("invalid JSON: unexpected end of input (truncated file?)")
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

// Parse builds a Tokenizer from the bytes of a tokenizer.json.
func Parse(data []byte, opt Options) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, jsonError(data, err)
	}
	if isNull(f.Model) {
		return nil, errors.New(`no "model" section`)
	}
	t := &Tokenizer{}
	var err error
	if t.model, err = parseModel(f.Model); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if !isNull(f.Normalizer) {
		if t.normalizer, err = parseNormalizer(f.Normalizer); err != nil {
			return nil, fmt.Errorf("normalizer: %w", err)
		}
	}
	if !isNull(f.PreTokenizer) {
		if err = parsePreTokenizer(f.PreTokenizer, opt.Impl, &t.pre, true); err != nil {
			return nil, fmt.Errorf("pre_tokenizer: %w", err)
		}
	}
	if !isNull(f.PostProcessor) {
		if t.post, err = parsePostProcessor(f.PostProcessor); err != nil {
			return nil, fmt.Errorf("post_processor: %w", err)
		}
	}
	if !isNull(f.Decoder) {
		if t.wpDecoder, err = parseWordPieceDecoder(f.Decoder); err != nil {
			return nil, fmt.Errorf("decoder: %w", err)
		}
	}
	if !isNull(f.Decoder) && t.wpDecoder == nil {
		if t.byteLevelDecoder, err = parseDecoder(f.Decoder); err != nil {
			return nil, fmt.Errorf("decoder: %w", err)
		}
	}
	if err := t.setup(f.AddedTokens); err != nil {
		return nil, err
	}
	return t, nil
}

func parseModel(raw json.RawMessage) (model, error) {
	var m struct {
		Type                    string         `json:"type"`
		Vocab                   map[string]int `json:"vocab"`
		Merges                  *mergeList     `json:"merges"`
		UnkToken                *string        `json:"unk_token"`
		Dropout                 *float64       `json:"dropout"`
		ContinuingSubwordPrefix *string        `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string        `json:"end_of_word_suffix"`
		FuseUnk                 bool           `json:"fuse_unk"`
		ByteFallback            bool           `json:"byte_fallback"`
		IgnoreMerges            bool           `json:"ignore_merges"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, jsonError(raw, err)
	}
	if m.Type == "" {
		// HF's untagged form: a model with merges is BPE.
		if m.Merges != nil {
			m.Type = "BPE"
		} else {
			return nil, errors.New(`"type" is missing`)
		}
	}
	if m.Vocab == nil {
		return nil, fmt.Errorf("%s model has no \"vocab\"", m.Type)
	}
	for tok, id := range m.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("vocab: token %q has negative id %d", tok, id)
		}
	}
	switch m.Type {
	case "BPE":
		if m.Merges == nil {
			return nil, errors.New(`BPE model has no "merges"`)
		}
		if m.Merges.err != nil {
			return nil, m.Merges.err
		}
		if m.Dropout != nil && *m.Dropout > 0 {
			return nil, fmt.Errorf("BPE dropout %g is not supported (encoding would be random)", *m.Dropout)
		}
		b := &bpeModel{vocab: m.Vocab, unk: -1, fuseUnk: m.FuseUnk, byteFallback: m.ByteFallback, ignoreMerges: m.IgnoreMerges}
		if m.ContinuingSubwordPrefix != nil {
			b.prefix = *m.ContinuingSubwordPrefix
		}
		if m.EndOfWordSuffix != nil {
			b.suffix = *m.EndOfWordSuffix
		}
		if m.UnkToken != nil {
			id, ok := m.Vocab[*m.UnkToken]
			if !ok {
				return nil, fmt.Errorf("unk_token %q is not in the vocab", *m.UnkToken)
			}
			b.unk = id
		}
		pairs := m.Merges.pairs
		b.merges = newMergeTable(len(pairs))
		for rank, p := range pairs {
			a, ok := m.Vocab[p[0]]
			if !ok {
				return nil, fmt.Errorf("merges[%d]: %q is not in the vocab", rank, p[0])
			}
			c, ok := m.Vocab[p[1]]
			if !ok {
				return nil, fmt.Errorf("merges[%d]: %q is not in the vocab", rank, p[1])
			}
			right := p[1]
			if len(b.prefix) <= len(right) {
				right = right[len(b.prefix):]
			}
			nw, ok := m.Vocab[p[0]+right]
			if !ok {
				return nil, fmt.Errorf("merges[%d]: merged token %q is not in the vocab", rank, p[0]+right)
			}
			b.merges.set(uint64(a)<<32|uint64(c), uint64(rank)<<32|uint64(nw))
		}
		b.init()
		return b, nil
	case "WordLevel":
		if m.UnkToken == nil {
			return nil, errors.New("WordLevel model without unk_token is not supported (HF fails on every unknown word)")
		}
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("unk_token %q is not in the vocab", *m.UnkToken)
		}
		return &wordLevelModel{vocab: m.Vocab, unk: id}, nil
	case "WordPiece":
		return parseWordPiece(raw, m.Vocab)
	}
	return nil, fmt.Errorf("model type %q is not supported (BPE, WordLevel and WordPiece are)", m.Type)
}

// mergeList reads both encodings HF writes for merges: ["a b", ...] (before
// tokenizers 0.20) and [["a", "b"], ...]. It scans the array by hand: the
// Qwen file has 151k merges and one json.Unmarshal per merge is slow.
type mergeList struct {
	pairs [][2]string
	err   error // a malformed entry, reported by parseModel with context
}

func (ml *mergeList) UnmarshalJSON(b []byte) error {
	// encoding/json has already checked that b is valid JSON.
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		ml.err = fmt.Errorf("merges: want a JSON array, got %.20s", b)
		return nil
	}
	i = skipSpace(b, i+1)
	for n := 0; i < len(b) && b[i] != ']'; n++ {
		switch b[i] {
		case '"':
			s, next, err := jsonString(b, i)
			if err != nil {
				return err
			}
			parts := strings.Split(s, " ")
			if len(parts) != 2 {
				ml.err = fmt.Errorf("merges[%d]: %q is not two tokens separated by one space", n, s)
				return nil
			}
			ml.pairs = append(ml.pairs, [2]string{parts[0], parts[1]})
			i = next
		case '[':
			var pair [2]string
			j := skipSpace(b, i+1)
			k := 0
			for ; j < len(b) && b[j] == '"'; k++ {
				s, next, err := jsonString(b, j)
				if err != nil {
					return err
				}
				if k < 2 {
					pair[k] = s
				}
				j = skipSpace(b, next)
				if j < len(b) && b[j] == ',' {
					j = skipSpace(b, j+1)
				}
			}
			if k != 2 || j >= len(b) || b[j] != ']' {
				ml.err = fmt.Errorf("merges[%d]: want \"a b\" or [\"a\", \"b\"]", n)
				return nil
			}
			ml.pairs = append(ml.pairs, pair)
			i = j + 1
		default:
			ml.err = fmt.Errorf("merges[%d]: want \"a b\" or [\"a\", \"b\"], got %.20s", n, b[i:])
			return nil
		}
		i = skipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// jsonString decodes the JSON string starting at b[i] == '"' and returns it
// with the index after its closing quote.
func jsonString(b []byte, i int) (string, int, error) {
	escaped := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			if !escaped {
				return string(b[i+1 : j]), j + 1, nil
			}
			var s string
			if err := json.Unmarshal(b[i:j+1], &s); err != nil {
				return "", 0, err
			}
			return s, j + 1, nil
		}
	}
	return "", 0, errors.New("unterminated string in merges")
}

func parseNormalizer(raw json.RawMessage) (normalizer, error) {
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, jsonError(raw, err)
	}
	switch c.Type {
	case "NFC":
		return normForm{norm.NFC}, nil
	case "NFD":
		return normForm{norm.NFD}, nil
	case "NFKC":
		return normForm{norm.NFKC}, nil
	case "NFKD":
		return normForm{norm.NFKD}, nil
	case "Lowercase":
		return lowercase{}, nil
	case "BertNormalizer":
		return parseBertNormalizer(raw)
	case "Sequence":
		var seq normSequence
		for i, r := range c.Normalizers {
			n, err := parseNormalizer(r)
			if err != nil {
				return nil, fmt.Errorf("Sequence[%d]: %w", i, err)
			}
			seq = append(seq, n)
		}
		return seq, nil
	}
	return nil, fmt.Errorf("normalizer type %q is not supported (NFC, NFD, NFKC, NFKD, Lowercase, BertNormalizer and Sequence are)", c.Type)
}

// parsePreTokenizer appends the steps of a pre_tokenizer to p. ByteLevel must
// come last: after it the pieces are byte-level strings, which this package
// keeps as raw bytes until the model looks them up.
func parsePreTokenizer(raw json.RawMessage, impl Impl, p *pipeline, last bool) error {
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return jsonError(raw, err)
	}
	if p.byteLevel {
		return fmt.Errorf("%s after ByteLevel is not supported (ByteLevel must be the last pre-tokenizer)", c.Type)
	}
	switch c.Type {
	case "Sequence":
		for i, r := range c.Pretokenizers {
			if err := parsePreTokenizer(r, impl, p, last && i == len(c.Pretokenizers)-1); err != nil {
				return fmt.Errorf("Sequence[%d]: %w", i, err)
			}
		}
		return nil
	case "Split":
		if c.Pattern == nil || (c.Pattern.Regex == nil && c.Pattern.String == nil) {
			return errors.New(`Split without a "pattern" {"Regex": ...} or {"String": ...}`)
		}
		b, err := parseBehavior(c.Behavior)
		if err != nil {
			return fmt.Errorf("Split: %w", err)
		}
		var m matcher
		if c.Pattern.Regex != nil {
			if m, err = newRegexMatcher(*c.Pattern.Regex, impl); err != nil {
				return fmt.Errorf("Split: %w", err)
			}
		} else {
			m = literalMatcher{*c.Pattern.String}
		}
		p.steps = append(p.steps, pipeStep{split: &splitStep{m: m, behavior: b, invert: c.Invert}})
		return nil
	case "ByteLevel":
		if !last {
			return errors.New("ByteLevel before other pre-tokenizers is not supported (it must be the last)")
		}
		if c.AddPrefixSpace {
			p.steps = append(p.steps, pipeStep{prefixSpace: true})
		}
		if c.UseRegex == nil || *c.UseRegex { // HF's default is true
			m, err := newRegexMatcher(gpt2Pattern, impl)
			if err != nil {
				return err
			}
			p.steps = append(p.steps, pipeStep{split: &splitStep{m: m, behavior: behIsolated}})
		}
		p.byteLevel = true
		return nil
	case "Whitespace":
		p.steps = append(p.steps, pipeStep{split: &splitStep{m: wordMatcher{}, behavior: behRemoved, invert: true}})
		return nil
	case "WhitespaceSplit":
		p.steps = append(p.steps, pipeStep{split: &splitStep{m: spaceMatcher{}, behavior: behRemoved}})
		return nil
	case "BertPreTokenizer":
		bertPreTokenizer(p)
		return nil
	}
	return fmt.Errorf("pre-tokenizer type %q is not supported (Sequence, Split, ByteLevel, Whitespace, WhitespaceSplit and BertPreTokenizer are)", c.Type)
}

// parseDecoder reports whether the decoder is ByteLevel, the only one
// supported besides none (tokens joined by spaces, as HF does).
func parseDecoder(raw json.RawMessage) (bool, error) {
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return false, jsonError(raw, err)
	}
	if c.Type == "ByteLevel" {
		return true, nil
	}
	return false, fmt.Errorf("decoder type %q is not supported (ByteLevel and WordPiece are)", c.Type)
}

// Lazy loads a tokenizer on first use, so that commands whose input may be
// plain ids work with model directories that carry no tokenizer.json. path is
// a --tokenizer flag value; when it is empty the model directory is used.
type Lazy struct {
	path string
	tok  *Tokenizer
	err  error
	done bool
}

// NewLazy returns a Lazy for an explicit path, or for modelDir when path is
// empty (an error, reported at first use, if modelDir has no tokenizer.json).
func NewLazy(path, modelDir string) *Lazy {
	if path == "" {
		path = modelDir
		if _, err := os.Stat(filepath.Join(modelDir, "tokenizer.json")); err != nil {
			return &Lazy{done: true, err: fmt.Errorf("%s has no tokenizer.json (give --tokenizer)", modelDir)}
		}
	}
	return &Lazy{path: path}
}

// Get loads the tokenizer the first time and returns the same result after.
func (l *Lazy) Get() (*Tokenizer, error) {
	if !l.done {
		l.done = true
		l.tok, l.err = Load(l.path)
	}
	return l.tok, l.err
}
