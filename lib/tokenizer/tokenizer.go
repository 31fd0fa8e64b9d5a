// Package tokenizer loads Hugging Face tokenizer.json files and encodes text
// to the same token ids as HF `tokenizers` (checked against its output on the
// real Qwen3 tokenizer): byte-level BPE with merges, WordLevel, the Qwen and
// GPT-2 pre-tokenizer regexes (written by hand, and through regexp2),
// NFC/NFKC/Lowercase normalizers, added and special tokens with their flags,
// decoding (whole or streamed), counting, and ChatML prompts built as ids.
//
// Encoding follows HF's `encode(text, add_special_tokens=False)`: special
// tokens written in the text are matched, nothing is added around it.
// EncodeSpecial is `add_special_tokens=True` with truncation (BERT's
// [CLS] … [SEP]); WordPiece models with BertNormalizer and BertPreTokenizer
// are in wordpiece.go.
//
// Typical use:
//
//	tok, err := tokenizer.Load("ckpt/")         // or ".../tokenizer.json"
//	ids := tok.Encode("Who wrote Hamlet?")
//	text, err := tok.Decode(ids)                 // errors on unknown ids
//	eos, err := tok.SpecialID("<|im_end|>")
//	chat, err := tok.ChatML()
//	prompt := chat.Render(msgs, true, "<mem>")   // ids, no text round trip
//	ctx := chat.CloseTurn(chat.AppendGenerated(prompt, generated))
//	d := tok.NewDecoder()                        // streaming: d.Add(id), d.Flush()
//
// A Tokenizer is safe for concurrent use.
package tokenizer

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"
)

// Tokenizer encodes and decodes text. It is safe for concurrent use.
type Tokenizer struct {
	model            model
	normalizer       normalizer // nil: none
	pre              pipeline
	byteLevelDecoder bool              // false: tokens are joined by spaces
	wpDecoder        *wordPieceDecoder // WordPiece decoder (wordpiece.go)
	post             *postProcessor    // special tokens of EncodeSpecial; nil: none

	added     []AddedToken
	addedRaw  *addedMatcher // normalized=false tokens, matched in the raw text
	addedNorm *addedMatcher // normalized=true tokens, matched after normalization

	idToTok   []string
	hasID     []bool
	tokToID   map[string]int
	special   map[string]int
	isSpecial []bool
	tokBytes  [][]byte // decoder output of each id on its own
	vocabSize int

	pool sync.Pool // *scratch
}

// pipeline is the pre-tokenizer: split steps, then optionally the
// byte-level mapping, which is left to the model (see bpeModel.tokenize).
type pipeline struct {
	steps     []pipeStep
	byteLevel bool
}

type pipeStep struct {
	split       *splitStep
	prefixSpace bool // ByteLevel add_prefix_space
}

// scratch holds the buffers of one Encode call.
type scratch struct {
	pieces     []piece
	a, b       []string
	spans      []span
	segs       []seg
	keep       []span
	word       []int32
	ranks      []uint32
	news       []int32
	heap       []heapItem
	countBuf   []int
	normPieces []piece
}

func (t *Tokenizer) setup(added []AddedToken) error {
	vocab := t.model.vocabulary()
	maxID := -1
	for _, id := range vocab {
		maxID = max(maxID, id)
	}
	for i, a := range added {
		if a.ID < 0 {
			return fmt.Errorf("added_tokens[%d] %q: negative id %d", i, a.Content, a.ID)
		}
		if a.Content == "" {
			return fmt.Errorf("added_tokens[%d]: empty content", i)
		}
		maxID = max(maxID, a.ID)
	}
	t.vocabSize = maxID + 1
	t.idToTok = make([]string, t.vocabSize)
	t.hasID = make([]bool, t.vocabSize)
	t.isSpecial = make([]bool, t.vocabSize)
	t.tokToID = make(map[string]int, len(added))
	t.special = map[string]int{}
	for tok, id := range vocab {
		t.idToTok[id], t.hasID[id] = tok, true
	}
	// Added tokens take precedence in both directions, as in HF.
	t.added = append([]AddedToken(nil), added...)
	var raw, nrm []AddedToken
	var nrmPat []string
	for _, a := range t.added {
		t.idToTok[a.ID], t.hasID[a.ID] = a.Content, true
		t.tokToID[a.Content] = a.ID
		if a.Special {
			t.special[a.Content] = a.ID
			t.isSpecial[a.ID] = true
		}
		if a.Normalized {
			nrm = append(nrm, a)
			p := a.Content
			if t.normalizer != nil {
				p = t.normalizer.normalize(p)
			}
			nrmPat = append(nrmPat, p)
		} else {
			raw = append(raw, a)
		}
	}
	rawPat := make([]string, len(raw))
	for i, a := range raw {
		rawPat[i] = a.Content
	}
	t.addedRaw = newAddedMatcher(raw, rawPat)
	t.addedNorm = newAddedMatcher(nrm, nrmPat)
	t.tokBytes = make([][]byte, t.vocabSize)
	for id, tok := range t.idToTok {
		if t.hasID[id] {
			t.tokBytes[id] = t.decodeToken(tok)
		}
	}
	t.pool.New = func() any { return new(scratch) }
	return nil
}

// decodeToken is the decoder applied to one token: with ByteLevel, its
// characters mapped back to bytes (a token with a character outside the
// byte alphabet is kept as its UTF-8, as HF does).
func (t *Tokenizer) decodeToken(tok string) []byte {
	if !t.byteLevelDecoder {
		return []byte(tok)
	}
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, ok := charByte[r]
		if !ok {
			return []byte(tok)
		}
		out = append(out, b)
	}
	return out
}

// Encode returns the ids of text. Invalid UTF-8 is first replaced with
// U+FFFD (HF only accepts valid strings).
func (t *Tokenizer) Encode(text string) []int { return t.AppendEncode(nil, text) }

// AppendEncode appends the ids of text to dst.
func (t *Tokenizer) AppendEncode(dst []int, text string) []int {
	if !utf8.ValidString(text) {
		text = lossyUTF8([]byte(text))
	}
	sc := t.pool.Get().(*scratch)
	defer t.pool.Put(sc)
	sc.pieces = t.addedRaw.split(text, sc.pieces[:0])
	for _, p := range sc.pieces {
		if p.id >= 0 {
			dst = append(dst, p.id)
			continue
		}
		s := p.text
		if t.normalizer != nil {
			s = t.normalizer.normalize(s)
		}
		if t.addedNorm.empty() {
			dst = t.encodeText(s, dst, sc)
			continue
		}
		sc.normPieces = t.addedNorm.split(s, sc.normPieces[:0])
		for _, q := range sc.normPieces {
			if q.id >= 0 {
				dst = append(dst, q.id)
			} else {
				dst = t.encodeText(q.text, dst, sc)
			}
		}
	}
	return dst
}

// encodeText pre-tokenizes normalized text and runs the model on each piece.
func (t *Tokenizer) encodeText(s string, dst []int, sc *scratch) []int {
	if s == "" {
		return dst
	}
	pieces := append(sc.a[:0], s)
	other := sc.b[:0]
	for _, st := range t.pre.steps {
		if st.prefixSpace {
			for i, p := range pieces {
				if !strings.HasPrefix(p, " ") {
					pieces[i] = " " + p
				}
			}
			continue
		}
		other = st.split.apply(pieces, other[:0], sc)
		pieces, other = other, pieces
	}
	for _, p := range pieces {
		dst = t.model.tokenize(p, t.pre.byteLevel, dst, sc)
	}
	sc.a, sc.b = pieces[:0], other[:0]
	return dst
}

// Count returns the number of tokens of text.
func (t *Tokenizer) Count(text string) int {
	sc := t.pool.Get().(*scratch)
	buf := sc.countBuf[:0]
	sc.countBuf = nil
	t.pool.Put(sc)
	buf = t.AppendEncode(buf, text)
	n := len(buf)
	sc = t.pool.Get().(*scratch)
	sc.countBuf = buf[:0]
	t.pool.Put(sc)
	return n
}

// VocabSize is the largest id plus one, counting added tokens.
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// TokenID returns the id of a token string (an added token or a vocabulary
// entry, in its byte-level form for byte-level models).
func (t *Tokenizer) TokenID(tok string) (int, bool) {
	if id, ok := t.tokToID[tok]; ok {
		return id, true
	}
	id, ok := t.model.vocabulary()[tok]
	return id, ok
}

// Token returns the token string of an id.
func (t *Tokenizer) Token(id int) (string, bool) {
	if id < 0 || id >= t.vocabSize || !t.hasID[id] {
		return "", false
	}
	return t.idToTok[id], true
}

// SpecialID returns the id of a special added token such as "<|im_end|>" or
// "<|endoftext|>", or an error naming it.
func (t *Tokenizer) SpecialID(name string) (int, error) {
	if id, ok := t.special[name]; ok {
		return id, nil
	}
	if id, ok := t.tokToID[name]; ok {
		return id, fmt.Errorf("%q is an added token but not a special one", name)
	}
	return -1, fmt.Errorf("the tokenizer has no special token %q", name)
}

// IsSpecial reports whether id is a special added token.
func (t *Tokenizer) IsSpecial(id int) bool {
	return id >= 0 && id < t.vocabSize && t.isSpecial[id]
}

// AddedTokens returns the added tokens sorted by id.
func (t *Tokenizer) AddedTokens() []AddedToken {
	out := append([]AddedToken(nil), t.added...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ByteLevel reports whether decoding maps tokens back to raw bytes (true
// for byte-level BPE), so that TokenBytes of consecutive ids concatenate.
func (t *Tokenizer) ByteLevel() bool { return t.byteLevelDecoder }

func (t *Tokenizer) checkID(id int) error {
	if id < 0 || id >= t.vocabSize {
		return fmt.Errorf("token id %d is out of range [0, %d)", id, t.vocabSize)
	}
	if !t.hasID[id] {
		return fmt.Errorf("token id %d is not in the vocabulary", id)
	}
	return nil
}

// TokenBytes returns what id decodes to on its own: raw bytes for a
// byte-level tokenizer, which may be part of a UTF-8 character. The slice
// must not be modified.
func (t *Tokenizer) TokenBytes(id int) ([]byte, error) {
	if err := t.checkID(id); err != nil {
		return nil, err
	}
	return t.tokBytes[id], nil
}

// Decode returns the text of ids as HF's decode(ids,
// skip_special_tokens=False) does: byte-level tokens are joined as bytes and
// invalid UTF-8 becomes U+FFFD; without a decoder tokens are joined by
// spaces.
func (t *Tokenizer) Decode(ids []int) (string, error) { return t.decode(ids, false) }

// DecodeSkipSpecial is Decode leaving out special tokens.
func (t *Tokenizer) DecodeSkipSpecial(ids []int) (string, error) { return t.decode(ids, true) }

func (t *Tokenizer) decode(ids []int, skip bool) (string, error) {
	if t.wpDecoder != nil {
		return t.wpDecoder.decode(t, ids, skip)
	}
	var buf []byte
	first := true
	for i, id := range ids {
		if err := t.checkID(id); err != nil {
			return "", fmt.Errorf("ids[%d]: %w", i, err)
		}
		if skip && t.isSpecial[id] {
			continue
		}
		if !t.byteLevelDecoder && !first {
			buf = append(buf, ' ')
		}
		first = false
		buf = append(buf, t.tokBytes[id]...)
	}
	if t.byteLevelDecoder {
		return lossyUTF8(buf), nil
	}
	return string(buf), nil
}

// Decoder decodes a stream of generated ids into text, emitting text only
// once its UTF-8 characters are complete. The concatenation of everything
// Add and Flush return equals Decode of all the ids.
type Decoder struct {
	t       *Tokenizer
	pending []byte
	started bool
}

// NewDecoder starts a streaming decode.
func (t *Tokenizer) NewDecoder() *Decoder { return &Decoder{t: t} }

// Add feeds one id and returns the text it completes (possibly "").
func (d *Decoder) Add(id int) (string, error) {
	if err := d.t.checkID(id); err != nil {
		return "", err
	}
	if d.t.wpDecoder != nil {
		n := 0
		if d.started {
			n = 1
		}
		d.started = true
		return d.t.wpDecoder.piece(d.t.idToTok[id], n), nil
	}
	if !d.t.byteLevelDecoder {
		s := d.t.idToTok[id]
		if d.started {
			s = " " + s
		}
		d.started = true
		return s, nil
	}
	d.pending = append(d.pending, d.t.tokBytes[id]...)
	// Emit everything up to an incomplete (but so far valid) sequence at
	// the end; invalid sequences are decided now and become U+FFFD.
	var out []byte
	b := d.pending
	for len(b) > 0 {
		n, ok, incomplete := utf8SeqIncomplete(b)
		if incomplete {
			break
		}
		if ok {
			out = append(out, b[:n]...)
		} else {
			out = append(out, "\uFFFD"...)
		}
		b = b[n:]
	}
	d.pending = append(d.pending[:0], b...)
	return string(out), nil
}

// Flush returns what is left (an incomplete character becomes U+FFFD) and
// resets the decoder.
func (d *Decoder) Flush() string {
	s := ""
	if len(d.pending) > 0 {
		s = lossyUTF8(d.pending)
	}
	d.pending = d.pending[:0]
	d.started = false
	return s
}

// Pending reports whether bytes of an incomplete character are held back.
func (d *Decoder) Pending() bool { return len(d.pending) > 0 }
