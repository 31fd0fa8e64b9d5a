package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Character classes as the regex engines behind HF tokenizers see them.
// Oniguruma (Split patterns) and Rust's regex crate (Whitespace) both use
// Unicode properties: \p{L} letters, \p{N} numbers (Nd|Nl|No), \s the
// White_Space property, which is exactly Go's unicode.IsSpace.

// asciiClass caches the classes of the 128 ASCII characters.
var asciiClass [128]uint8

const (
	clsL  = 1 << iota // \p{L}
	clsN              // \p{N}
	clsS              // \s
	clsW              // Rust regex \w
	clsNL             // \r or \n
)

func init() {
	for r := rune(0); r < 128; r++ {
		var c uint8
		if unicode.IsLetter(r) {
			c |= clsL
		}
		if unicode.IsNumber(r) {
			c |= clsN
		}
		if unicode.IsSpace(r) {
			c |= clsS
		}
		if isWordSlow(r) {
			c |= clsW
		}
		if r == '\r' || r == '\n' {
			c |= clsNL
		}
		asciiClass[r] = c
	}
}

func isL(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiClass[r]&clsL != 0
	}
	return unicode.IsLetter(r)
}

func isN(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiClass[r]&clsN != 0
	}
	return unicode.IsNumber(r)
}

func isS(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiClass[r]&clsS != 0
	}
	return unicode.IsSpace(r)
}

// isWord is \w of Rust's regex crate: Alphabetic, marks, decimal digits,
// connector punctuation and the two join controls.
func isWord(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiClass[r]&clsW != 0
	}
	return isWordSlow(r)
}

func isWordSlow(r rune) bool {
	return unicode.IsLetter(r) || unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r) ||
		unicode.IsMark(r) || unicode.Is(unicode.Nd, r) || unicode.Is(unicode.Pc, r) || r == 0x200C || r == 0x200D
}

// decodeRune is utf8.DecodeRuneInString with an ASCII fast path; the
// tokenizer only ever scans valid UTF-8.
func decodeRune(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// lossyUTF8 converts b to a string the way Rust's String::from_utf8_lossy
// does: every maximal invalid subpart of a sequence becomes one U+FFFD. This
// differs from Go's conversion loops, which replace every bad byte.
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		n, ok := utf8Seq(b)
		if ok {
			out = append(out, b[:n]...)
		} else {
			out = append(out, "\uFFFD"...)
		}
		b = b[n:]
	}
	return string(out)
}

// utf8Seq looks at the sequence starting at b[0]. It returns (length, true)
// for a valid character, or (length of the maximal invalid subpart, false);
// a sequence cut short by the end of b counts as invalid.
func utf8Seq(b []byte) (int, bool) {
	n, ok, _ := utf8SeqIncomplete(b)
	return n, ok
}

// utf8SeqIncomplete is utf8Seq that also reports, with incomplete, when b
// ends inside a sequence that more bytes could still make valid.
func utf8SeqIncomplete(b []byte) (n int, ok bool, incomplete bool) {
	c := b[0]
	if c < 0x80 {
		return 1, true, false
	}
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1, false, false
	}
	for k := 1; k <= need; k++ {
		if k >= len(b) {
			return k, false, true
		}
		if b[k] < lo || b[k] > hi {
			return k, false, false
		}
		lo, hi = 0x80, 0xBF
	}
	return need + 1, true, false
}
