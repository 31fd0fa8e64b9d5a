package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// span is a byte range [start, end) of a string.
type span struct{ start, end int }

// matcher finds the non-overlapping matches of a Split pattern, left to
// right, in s (valid UTF-8). It appends them to dst.
type matcher interface {
	matches(s string, dst []span) []span
}

// Regex source strings the hand-written matchers implement. qwenPattern is
// the Split regex of the Qwen2/Qwen2.5/Qwen3 tokenizer.json; gpt2Pattern is
// what HF's ByteLevel pre-tokenizer uses when use_regex is true.
const (
	qwenPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// Impl selects how regex Split patterns are matched.
type Impl int

const (
	// ImplHand uses the hand-written matchers for the Qwen and GPT-2
	// patterns (the default, and the faster one) and regexp2 for any other.
	ImplHand Impl = iota
	// ImplRegexp2 matches every pattern with github.com/dlclark/regexp2,
	// which has the look-ahead `\s+(?!\S)` that Go's regexp lacks.
	ImplRegexp2
)

func (i Impl) String() string {
	if i == ImplRegexp2 {
		return "regexp2"
	}
	return "hand"
}

// newRegexMatcher compiles an HF Split/ByteLevel regex.
func newRegexMatcher(pattern string, impl Impl) (matcher, error) {
	if impl == ImplHand {
		switch pattern {
		case qwenPattern:
			return qwenMatcher{}, nil
		case gpt2Pattern:
			return gpt2Matcher{}, nil
		}
	}
	re, err := regexp2.Compile(pattern, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %v", pattern, err)
	}
	return &regexp2Matcher{re: re}, nil
}

// regexp2Matcher runs a pattern with regexp2, which matches over runes; the
// rune positions it reports are mapped back to byte offsets.
type regexp2Matcher struct{ re *regexp2.Regexp }

func (m *regexp2Matcher) matches(s string, dst []span) []span {
	runes := []rune(s)
	// offs[k] is the byte offset of rune k.
	offs := make([]int, len(runes)+1)
	b := 0
	for k, r := range runes {
		offs[k] = b
		b += utf8.RuneLen(r)
	}
	offs[len(runes)] = b
	mt, err := m.re.FindRunesMatch(runes)
	for err == nil && mt != nil {
		if mt.Length > 0 {
			dst = append(dst, span{offs[mt.Index], offs[mt.Index+mt.Length]})
		}
		mt, err = m.re.FindNextMatch(mt)
	}
	return dst
}

// qwenMatcher is the Qwen pre-tokenizer regex written by hand:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N} |
//	 ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
//
// Every character starts a match of some alternative (letters, digits,
// whitespace and "everything else" each have one), so the matches tile the
// string and each one starts where the previous ended.
type qwenMatcher struct{}

func (qwenMatcher) matches(s string, dst []span) []span {
	for i := 0; i < len(s); {
		end := qwenMatchAt(s, i)
		dst = append(dst, span{i, end})
		i = end
	}
	return dst
}

// qwenMatchAt returns the end of the match starting at i, trying the
// alternatives in order as a backtracking engine (Oniguruma) does.
func qwenMatchAt(s string, i int) int {
	r0, n0 := decodeRune(s, i)
	// 1: contractions, case-insensitive.
	if r0 == '\'' {
		if n := contraction(s, i+1, true); n > 0 {
			return i + 1 + n
		}
	}
	// 2: an optional non-letter, non-digit, non-CR/LF character, then letters.
	if isL(r0) {
		return letterRun(s, i+n0)
	}
	if r0 != '\r' && r0 != '\n' && !isN(r0) && i+n0 < len(s) {
		if r1, n1 := decodeRune(s, i+n0); isL(r1) {
			return letterRun(s, i+n0+n1)
		}
	}
	// 3: a single digit.
	if isN(r0) {
		return i + n0
	}
	// 4: an optional space, symbols/punctuation, then CR/LF.
	if r0 == ' ' && i+1 < len(s) {
		if r1, n1 := decodeRune(s, i+1); isOther(r1) {
			return crlfRun(s, otherRun(s, i+1+n1))
		}
	}
	if isOther(r0) {
		return crlfRun(s, otherRun(s, i+n0))
	}
	// r0 is whitespace. Find the whitespace run [i, j), its last CR/LF and the
	// start of its last character.
	j, lastNL, lastStart := i, -1, i
	for j < len(s) {
		r, n := decodeRune(s, j)
		if !isS(r) {
			break
		}
		if r == '\r' || r == '\n' {
			lastNL = j
		}
		lastStart = j
		j += n
	}
	// 5: \s*[\r\n]+ — backtracking leaves the match at the run's last CR/LF.
	if lastNL >= 0 {
		return lastNL + 1
	}
	// 6: \s+(?!\S) — all of the run at the end of the text, else all but
	// its last character (which then goes with the word after it).
	if j == len(s) {
		return j
	}
	if lastStart > i {
		return lastStart
	}
	// 7: \s+
	return j
}

// contraction matches s|t|re|ve|m|ll|d at i (after an apostrophe) and
// returns its length in bytes, or 0. With fold, letters match in either case
// and 's' also matches U+017F LATIN SMALL LETTER LONG S, which Unicode case
// folding (and so Oniguruma's (?i)) equates with 's'.
func contraction(s string, i int, fold bool) int {
	if i >= len(s) {
		return 0
	}
	at := func(k int) byte {
		if k < len(s) {
			c := s[k]
			if fold && c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			return c
		}
		return 0
	}
	switch at(i) {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if at(i+1) == 'e' {
			return 2
		}
	case 'l':
		if at(i+1) == 'l' {
			return 2
		}
	case 0xC5: // U+017F is C5 BF
		if fold && i+1 < len(s) && s[i+1] == 0xBF {
			return 2
		}
	}
	return 0
}

// isOther is [^\s\p{L}\p{N}].
func isOther(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiClass[r]&(clsL|clsN|clsS) == 0
	}
	return !isS(r) && !isL(r) && !isN(r)
}

func letterRun(s string, i int) int {
	for i < len(s) {
		// ASCII fast path: most text is ASCII letters.
		if c := s[i]; c < utf8.RuneSelf {
			if asciiClass[c]&clsL == 0 {
				return i
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isL(r) {
			break
		}
		i += n
	}
	return i
}

func numberRun(s string, i int) int {
	for i < len(s) {
		r, n := decodeRune(s, i)
		if !isN(r) {
			break
		}
		i += n
	}
	return i
}

func otherRun(s string, i int) int {
	for i < len(s) {
		r, n := decodeRune(s, i)
		if !isOther(r) {
			break
		}
		i += n
	}
	return i
}

func crlfRun(s string, i int) int {
	for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return i
}

// gpt2Matcher is the GPT-2 regex of HF's ByteLevel pre-tokenizer, by hand:
//
//	's|'t|'re|'ve|'m|'ll|'d | ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+
type gpt2Matcher struct{}

func (gpt2Matcher) matches(s string, dst []span) []span {
	for i := 0; i < len(s); {
		end := gpt2MatchAt(s, i)
		dst = append(dst, span{i, end})
		i = end
	}
	return dst
}

func gpt2MatchAt(s string, i int) int {
	r0, n0 := decodeRune(s, i)
	if r0 == '\'' {
		if n := contraction(s, i+1, false); n > 0 {
			return i + 1 + n
		}
	}
	start, r, n := i, r0, n0
	if r0 == ' ' && i+1 < len(s) {
		// The optional leading space belongs to a following letter, digit or
		// symbol run.
		r1, n1 := decodeRune(s, i+1)
		if !isS(r1) {
			start, r, n = i+1, r1, n1
		}
	}
	switch {
	case isL(r):
		return letterRun(s, start+n)
	case isN(r):
		return numberRun(s, start+n)
	case isOther(r):
		return otherRun(s, start+n)
	}
	// Whitespace run [i, j).
	j, lastStart := i, i
	for j < len(s) {
		r, n := decodeRune(s, j)
		if !isS(r) {
			break
		}
		lastStart = j
		j += n
	}
	if j == len(s) || lastStart == i {
		return j
	}
	return lastStart
}

// wordMatcher matches \w+|[^\w\s]+ (Rust regex classes); the Whitespace
// pre-tokenizer keeps these matches and drops the rest.
type wordMatcher struct{}

func (wordMatcher) matches(s string, dst []span) []span {
	for i := 0; i < len(s); {
		r, n := decodeRune(s, i)
		if isS(r) {
			i += n
			continue
		}
		word := isWord(r)
		j := i + n
		for j < len(s) {
			r, n := decodeRune(s, j)
			if isS(r) || isWord(r) != word {
				break
			}
			j += n
		}
		dst = append(dst, span{i, j})
		i = j
	}
	return dst
}

// spaceMatcher matches every whitespace character on its own
// (WhitespaceSplit splits on char::is_whitespace).
type spaceMatcher struct{}

func (spaceMatcher) matches(s string, dst []span) []span {
	for i := 0; i < len(s); {
		r, n := decodeRune(s, i)
		if isS(r) {
			dst = append(dst, span{i, i + n})
		}
		i += n
	}
	return dst
}

// literalMatcher matches a fixed string (a Split pattern {"String": ...}).
type literalMatcher struct{ lit string }

func (m literalMatcher) matches(s string, dst []span) []span {
	if m.lit == "" {
		return dst
	}
	for off := 0; ; {
		k := strings.Index(s[off:], m.lit)
		if k < 0 {
			return dst
		}
		dst = append(dst, span{off + k, off + k + len(m.lit)})
		off += k + len(m.lit)
	}
}

// behavior is HF's SplitDelimiterBehavior.
type behavior int

const (
	behRemoved behavior = iota
	behIsolated
	behMergedWithPrevious
	behMergedWithNext
	behContiguous
)

func parseBehavior(s string) (behavior, error) {
	switch s {
	case "Removed":
		return behRemoved, nil
	case "Isolated":
		return behIsolated, nil
	case "MergedWithPrevious":
		return behMergedWithPrevious, nil
	case "MergedWithNext":
		return behMergedWithNext, nil
	case "Contiguous":
		return behContiguous, nil
	}
	return 0, fmt.Errorf("unknown split behavior %q (want Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous)", s)
}

// splitStep is one splitting pre-tokenizer: Split, the regex part of
// ByteLevel, Whitespace or WhitespaceSplit.
type splitStep struct {
	m        matcher
	behavior behavior
	invert   bool
}

// seg is a piece of a string and whether it was a pattern match.
type seg struct {
	span
	match bool
}

// apply splits every piece and appends the non-empty results to out, with
// the semantics of HF's NormalizedString::split.
func (st *splitStep) apply(pieces []string, out []string, sc *scratch) []string {
	for _, p := range pieces {
		if p == "" {
			continue
		}
		sc.spans = st.m.matches(p, sc.spans[:0])
		// Fast path: matches tile the piece and each is its own piece.
		if st.behavior == behIsolated {
			prev := 0
			for _, m := range sc.spans {
				if m.start > prev {
					out = append(out, p[prev:m.start])
				}
				if m.end > m.start {
					out = append(out, p[m.start:m.end])
				}
				prev = m.end
			}
			if prev < len(p) {
				out = append(out, p[prev:])
			}
			continue
		}
		segs := sc.segs[:0]
		prev := 0
		for _, m := range sc.spans {
			if m.start > prev {
				segs = append(segs, seg{span{prev, m.start}, st.invert})
			}
			segs = append(segs, seg{m, !st.invert})
			prev = m.end
		}
		if prev < len(p) {
			segs = append(segs, seg{span{prev, len(p)}, st.invert})
		}
		sc.segs = segs
		out = mergeSegs(p, segs, st.behavior, out, sc)
	}
	return out
}

func mergeSegs(p string, segs []seg, b behavior, out []string, sc *scratch) []string {
	keep := sc.keep[:0]
	switch b {
	case behRemoved:
		for _, s := range segs {
			if !s.match {
				keep = append(keep, s.span)
			}
		}
	case behContiguous:
		prevMatch := false
		for k, s := range segs {
			if k > 0 && s.match == prevMatch {
				keep[len(keep)-1].end = s.end
			} else {
				keep = append(keep, s.span)
			}
			prevMatch = s.match
		}
	case behMergedWithPrevious:
		prevMatch := false
		for k, s := range segs {
			if k > 0 && s.match && !prevMatch {
				keep[len(keep)-1].end = s.end
			} else {
				keep = append(keep, s.span)
			}
			prevMatch = s.match
		}
	case behMergedWithNext:
		prevMatch := false
		for k := len(segs) - 1; k >= 0; k-- {
			s := segs[k]
			if k < len(segs)-1 && s.match && !prevMatch {
				keep[len(keep)-1].start = s.start
			} else {
				keep = append(keep, s.span)
			}
			prevMatch = s.match
		}
		for a, z := 0, len(keep)-1; a < z; a, z = a+1, z-1 {
			keep[a], keep[z] = keep[z], keep[a]
		}
	}
	sc.keep = keep
	for _, k := range keep {
		if k.end > k.start {
			out = append(out, p[k.start:k.end])
		}
	}
	return out
}
