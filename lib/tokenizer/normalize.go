package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites text before pre-tokenization (HF "normalizer").
type normalizer interface {
	normalize(s string) string
}

// normForm is NFC, NFD, NFKC or NFKD.
type normForm struct{ f norm.Form }

func (n normForm) normalize(s string) string { return n.f.String(s) }

// lowercase is HF's Lowercase normalizer: Rust's char::to_lowercase applied
// to every character, which is the full Unicode lowercase mapping without
// context (no final-sigma rule). The only unconditional mapping longer than
// one character is U+0130 → "i\u0307".
type lowercase struct{}

func (lowercase) normalize(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r == 0x130 {
			b.WriteString("i\u0307")
			continue
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// normSequence applies normalizers in order.
type normSequence []normalizer

func (q normSequence) normalize(s string) string {
	for _, n := range q {
		s = n.normalize(s)
	}
	return s
}
