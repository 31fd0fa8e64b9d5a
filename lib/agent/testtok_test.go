package agent

import (
	"sort"
	"strings"
)

// testTok is a small deterministic tokenizer for the tests: special tokens
// are matched first, then a few multi-character pieces (longest first, so
// some pieces straddle tag boundaries on purpose), then one id per byte.
// Decode joins the bytes and replaces invalid UTF-8 with U+FFFD, as a real
// byte-level BPE decoder does, so a prefix that ends inside a multi-byte
// character does not decode to a prefix of the whole.
type testTok struct {
	pieces []string // longest first
	id     map[string]int
	str    map[int]string
}

const (
	idImStart = 256
	idImEnd   = 257
	idEOT     = 258
)

var testSpecials = []string{"<|im_start|>", "<|im_end|>", "<|endoftext|>"}

// Pieces with a fixed id. "x<mem" and "y</mem>\n" straddle the edges of a
// <mem> block; "</answer>!!" puts text after a stop string in one token.
var testPieces = []string{
	"<mem>", "</mem>", "<think>", "</think>", "<search>", "</search>",
	"<tool_call>", "</tool_call>", "<answer>", "</answer>", "<information>", "</information>",
	"x<mem", "y</mem>\n", "</answer>!!", "Doc ", "(Title: ", "the ", "assistant\n", "user\n",
}

func newTestTok() *testTok {
	t := &testTok{id: map[string]int{}, str: map[int]string{}}
	for i, s := range testSpecials {
		t.id[s], t.str[256+i] = 256+i, s
	}
	for i, s := range testPieces {
		t.id[s], t.str[300+i] = 300+i, s
	}
	t.pieces = append(append([]string(nil), testSpecials...), testPieces...)
	sort.SliceStable(t.pieces, func(i, j int) bool { return len(t.pieces[i]) > len(t.pieces[j]) })
	return t
}

func (t *testTok) Encode(s string) []int {
	var ids []int
	// Specials split the text first, as in HF tokenizers.
	for len(s) > 0 {
		at, which := len(s), ""
		for _, sp := range testSpecials {
			if i := strings.Index(s, sp); i >= 0 && i < at {
				at, which = i, sp
			}
		}
		ids = t.encodePlain(ids, s[:at])
		if which == "" {
			break
		}
		ids = append(ids, t.id[which])
		s = s[at+len(which):]
	}
	return ids
}

func (t *testTok) encodePlain(ids []int, s string) []int {
	for len(s) > 0 {
		matched := false
		for _, p := range t.pieces {
			if id, ok := t.id[p]; ok && id >= 300 && strings.HasPrefix(s, p) {
				ids = append(ids, id)
				s = s[len(p):]
				matched = true
				break
			}
		}
		if !matched {
			ids = append(ids, int(s[0]))
			s = s[1:]
		}
	}
	return ids
}

func (t *testTok) Decode(ids []int) string {
	var b strings.Builder
	for _, id := range ids {
		if id < 256 {
			b.WriteByte(byte(id))
		} else {
			b.WriteString(t.str[id])
		}
	}
	return strings.ToValidUTF8(b.String(), "\uFFFD")
}

// bytesOf encodes s one id per byte, never using a piece: a tokenization
// the tokenizer itself would not produce, as a sampler may.
func bytesOf(s string) []int {
	ids := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		ids[i] = int(s[i])
	}
	return ids
}

func cat(parts ...[]int) []int {
	var out []int
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
