package tokenizer

// BERT-family pieces of HF tokenizers: the WordPiece model, BertNormalizer,
// BertPreTokenizer, the WordPiece decoder and the post-processors that add
// [CLS]/[SEP] (TemplateProcessing, BertProcessing, RobertaProcessing), with
// truncation as HF's encode(text, add_special_tokens=True, truncation=True,
// max_length=n) does it. Semantics follow tokenizers/src/{models/wordpiece,
// normalizers/bert.rs, pre_tokenizers/bert.rs, processors/template.rs}.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// wordPieceModel is HF's WordPiece: greedy longest match from the start of
// the word, continuation pieces carry the prefix ("##"); a word with any
// part not in the vocabulary, or longer than maxChars characters, is the unk
// token as a whole.
type wordPieceModel struct {
	vocab    map[string]int
	unk      int
	prefix   string
	maxChars int
}

func (m *wordPieceModel) vocabulary() map[string]int { return m.vocab }

func (m *wordPieceModel) tokenize(word string, _ bool, dst []int, _ *scratch) []int {
	if m.maxChars > 0 && len(word) > m.maxChars && countRunes(word) > m.maxChars {
		return append(dst, m.unk)
	}
	n0 := len(dst)
	var buf []byte
	for start := 0; start < len(word); {
		end := len(word)
		found := -1
		for start < end {
			sub := word[start:end]
			var id int
			var ok bool
			if start > 0 {
				buf = append(append(buf[:0], m.prefix...), sub...)
				id, ok = m.vocab[string(buf)] // no allocation for a map lookup
			} else {
				id, ok = m.vocab[sub]
			}
			if ok {
				found = id
				break
			}
			// Drop the last character (not byte) of the candidate.
			_, n := utf8.DecodeLastRuneInString(sub)
			end -= n
		}
		if found < 0 {
			return append(dst[:n0], m.unk)
		}
		dst = append(dst, found)
		start = end
	}
	return dst
}

func countRunes(s string) int {
	n := 0
	for range s {
		n++
	}
	return n
}

func parseWordPiece(raw json.RawMessage, vocab map[string]int) (model, error) {
	var m struct {
		UnkToken *string `json:"unk_token"`
		Prefix   *string `json:"continuing_subword_prefix"`
		MaxChars *int    `json:"max_input_chars_per_word"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, jsonError(raw, err)
	}
	w := &wordPieceModel{vocab: vocab, prefix: "##", maxChars: 100} // HF's defaults
	if m.Prefix != nil {
		w.prefix = *m.Prefix
	}
	if m.MaxChars != nil {
		w.maxChars = *m.MaxChars
	}
	unk := "[UNK]"
	if m.UnkToken != nil {
		unk = *m.UnkToken
	}
	id, ok := vocab[unk]
	if !ok {
		return nil, fmt.Errorf("WordPiece unk_token %q is not in the vocab", unk)
	}
	w.unk = id
	return w, nil
}

// bertNormalizer is HF's BertNormalizer.
type bertNormalizer struct {
	cleanText, chinese, stripAccents, lowercase bool
}

func parseBertNormalizer(raw json.RawMessage) (normalizer, error) {
	var c struct {
		CleanText          *bool `json:"clean_text"`
		HandleChineseChars *bool `json:"handle_chinese_chars"`
		StripAccents       *bool `json:"strip_accents"`
		Lowercase          *bool `json:"lowercase"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, jsonError(raw, err)
	}
	b := bertNormalizer{cleanText: true, chinese: true, lowercase: true} // HF's defaults
	if c.CleanText != nil {
		b.cleanText = *c.CleanText
	}
	if c.HandleChineseChars != nil {
		b.chinese = *c.HandleChineseChars
	}
	if c.Lowercase != nil {
		b.lowercase = *c.Lowercase
	}
	// strip_accents null means "as lowercase" (BERT's uncased models).
	b.stripAccents = b.lowercase
	if c.StripAccents != nil {
		b.stripAccents = *c.StripAccents
	}
	return b, nil
}

func (b bertNormalizer) normalize(s string) string {
	if b.cleanText || b.chinese {
		var sb strings.Builder
		sb.Grow(len(s))
		for _, r := range s {
			if b.cleanText {
				if r == 0 || r == 0xFFFD || bertIsControl(r) {
					continue
				}
				if bertIsWhitespace(r) {
					r = ' '
				}
			}
			if b.chinese && isChineseChar(r) {
				sb.WriteByte(' ')
				sb.WriteRune(r)
				sb.WriteByte(' ')
				continue
			}
			sb.WriteRune(r)
		}
		s = sb.String()
	}
	if b.stripAccents {
		s = stripMn(norm.NFD.String(s))
	}
	if b.lowercase {
		s = lowercase{}.normalize(s)
	}
	return s
}

// stripMn drops nonspacing marks (category Mn), as HF's strip_accents does
// after NFD.
func stripMn(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s))
	for _, r := range s {
		if !unicode.Is(unicode.Mn, r) {
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

func bertIsWhitespace(r rune) bool {
	return r == '\t' || r == '\n' || r == '\r' || unicode.IsSpace(r)
}

// bertIsControl is HF's is_control: the "other" categories (Cc, Cf, Co, Cs
// and unassigned code points), except tab, newline and carriage return.
// Everything else has a category in L, M, N, P, S or Z.
func bertIsControl(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	if r < 0x80 {
		return r < 0x20 || r == 0x7F
	}
	return !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z)
}

// isChineseChar is HF's CJK test (the ranges of tokenizers' bert.rs).
func isChineseChar(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) || (r >= 0x3400 && r <= 0x4DBF) || (r >= 0x20000 && r <= 0x2A6DF) ||
		(r >= 0x2A700 && r <= 0x2B73F) || (r >= 0x2B740 && r <= 0x2B81F) || (r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) || (r >= 0x2F800 && r <= 0x2FA1F)
}

// bertPunctMatcher matches every punctuation character on its own: ASCII
// punctuation (which includes symbols such as $ + < = > ^ ` | ~) or Unicode
// category P.
type bertPunctMatcher struct{}

func (bertPunctMatcher) matches(s string, dst []span) []span {
	for i := 0; i < len(s); {
		r, n := decodeRune(s, i)
		if isBertPunct(r) {
			dst = append(dst, span{i, i + n})
		}
		i += n
	}
	return dst
}

func isBertPunct(r rune) bool {
	if r < 0x80 {
		return (r >= '!' && r <= '/') || (r >= ':' && r <= '@') || (r >= '[' && r <= '`') || (r >= '{' && r <= '~')
	}
	return unicode.IsPunct(r)
}

// bertPreTokenizer is BertPreTokenizer: split on whitespace (removed), then
// isolate each punctuation character.
func bertPreTokenizer(p *pipeline) {
	p.steps = append(p.steps,
		pipeStep{split: &splitStep{m: spaceMatcher{}, behavior: behRemoved}},
		pipeStep{split: &splitStep{m: bertPunctMatcher{}, behavior: behIsolated}})
}

// postProcessor is what encode with add_special_tokens=True puts around a
// single sequence.
type postProcessor struct {
	prefix, suffix []int
}

type templatePiece struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

// parsePostProcessor reads the post-processors this package knows. Only
// the single-sequence template matters (pairs are never encoded here);
// ByteLevel only touches offsets.
func parsePostProcessor(raw json.RawMessage) (*postProcessor, error) {
	var c struct {
		Type          string            `json:"type"`
		Processors    []json.RawMessage `json:"processors"`
		Single        []templatePiece   `json:"single"`
		SpecialTokens map[string]struct {
			IDs []int `json:"ids"`
		} `json:"special_tokens"`
		Sep []json.RawMessage `json:"sep"`
		Cls []json.RawMessage `json:"cls"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, jsonError(raw, err)
	}
	switch c.Type {
	case "ByteLevel":
		return nil, nil
	case "Sequence":
		var out *postProcessor
		for i, r := range c.Processors {
			p, err := parsePostProcessor(r)
			if err != nil {
				return nil, fmt.Errorf("Sequence[%d]: %w", i, err)
			}
			if p != nil {
				if out != nil {
					return nil, fmt.Errorf("Sequence[%d]: two post-processors that add tokens", i)
				}
				out = p
			}
		}
		return out, nil
	case "TemplateProcessing":
		p := &postProcessor{}
		seen := false
		for i, piece := range c.Single {
			switch {
			case piece.Sequence != nil:
				if seen {
					return nil, errors.New(`TemplateProcessing: "single" names the sequence twice`)
				}
				seen = true
			case piece.SpecialToken != nil:
				st, ok := c.SpecialTokens[piece.SpecialToken.ID]
				if !ok {
					return nil, fmt.Errorf("TemplateProcessing: single[%d] %q is not in special_tokens", i, piece.SpecialToken.ID)
				}
				if seen {
					p.suffix = append(p.suffix, st.IDs...)
				} else {
					p.prefix = append(p.prefix, st.IDs...)
				}
			default:
				return nil, fmt.Errorf("TemplateProcessing: single[%d] is neither SpecialToken nor Sequence", i)
			}
		}
		if !seen {
			return nil, errors.New(`TemplateProcessing: "single" has no Sequence`)
		}
		return p, nil
	case "BertProcessing", "RobertaProcessing":
		// {"sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}: single = cls A sep.
		cls, err := tokenPairID(c.Cls)
		if err != nil {
			return nil, fmt.Errorf("%s cls: %w", c.Type, err)
		}
		sep, err := tokenPairID(c.Sep)
		if err != nil {
			return nil, fmt.Errorf("%s sep: %w", c.Type, err)
		}
		return &postProcessor{prefix: []int{cls}, suffix: []int{sep}}, nil
	}
	return nil, fmt.Errorf("post-processor type %q is not supported", c.Type)
}

func tokenPairID(p []json.RawMessage) (int, error) {
	if len(p) != 2 {
		return 0, errors.New(`want ["token", id]`)
	}
	var id int
	if err := json.Unmarshal(p[1], &id); err != nil {
		return 0, errors.New(`want ["token", id]`)
	}
	return id, nil
}

// EncodeSpecial is HF's encode(text, add_special_tokens=True) with
// truncation to maxLen tokens when maxLen > 0: the text's ids are cut from
// the right so that, with the post-processor's special tokens ([CLS] and
// [SEP] for BERT), the result has at most maxLen ids. Without a
// post-processor it is Encode truncated to maxLen.
func (t *Tokenizer) EncodeSpecial(text string, maxLen int) []int {
	var pre, suf []int
	if t.post != nil {
		pre, suf = t.post.prefix, t.post.suffix
	}
	out := append([]int(nil), pre...)
	out = t.AppendEncode(out, text)
	if maxLen > 0 {
		room := max(maxLen-len(pre)-len(suf), 0)
		if len(out)-len(pre) > room {
			out = out[:len(pre)+room]
		}
	}
	return append(out, suf...)
}

// SpecialTokensAdded is the number of ids EncodeSpecial adds around a text.
func (t *Tokenizer) SpecialTokensAdded() int {
	if t.post == nil {
		return 0
	}
	return len(t.post.prefix) + len(t.post.suffix)
}

// wordPieceDecoder is HF's WordPiece decoder: continuation pieces are glued
// to the previous token, others are joined by a space; cleanup removes the
// spaces BERT's tokenization puts before punctuation and contractions.
type wordPieceDecoder struct {
	prefix  string
	cleanup bool
}

func parseWordPieceDecoder(raw json.RawMessage) (*wordPieceDecoder, error) {
	var c struct {
		Type    string  `json:"type"`
		Prefix  *string `json:"prefix"`
		Cleanup *bool   `json:"cleanup"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, jsonError(raw, err)
	}
	if c.Type != "WordPiece" {
		return nil, nil
	}
	d := &wordPieceDecoder{prefix: "##", cleanup: true}
	if c.Prefix != nil {
		d.prefix = *c.Prefix
	}
	if c.Cleanup != nil {
		d.cleanup = *c.Cleanup
	}
	return d, nil
}

// piece returns the text of the i-th decoded token (i counts tokens kept).
func (d *wordPieceDecoder) piece(tok string, i int) string {
	if i > 0 {
		if strings.HasPrefix(tok, d.prefix) {
			tok = tok[len(d.prefix):]
		} else {
			tok = " " + tok
		}
	}
	if d.cleanup {
		tok = cleanupTokenization(tok)
	}
	return tok
}

// cleanupTokenization is HF's cleanup (decoders/wordpiece.rs), applied to
// each token's text.
// The replacements run one after another, as there.
func cleanupTokenization(s string) string {
	for i := 0; i < len(cleanupPairs); i += 2 {
		s = strings.ReplaceAll(s, cleanupPairs[i], cleanupPairs[i+1])
	}
	return s
}

var cleanupPairs = []string{" .", ".", " ?", "?", " !", "!", " ,", ",", " ' ", "'", " n't", "n't", " 'm", "'m",
	" do not", " don't", " 's", "'s", " 've", "'ve", " 're", "'re"}

func (d *wordPieceDecoder) decode(t *Tokenizer, ids []int, skip bool) (string, error) {
	var sb strings.Builder
	n := 0
	for i, id := range ids {
		if err := t.checkID(id); err != nil {
			return "", fmt.Errorf("ids[%d]: %w", i, err)
		}
		if skip && t.isSpecial[id] {
			continue
		}
		sb.WriteString(d.piece(t.idToTok[id], n))
		n++
	}
	return sb.String(), nil
}
