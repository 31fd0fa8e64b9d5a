package tokenizer

import (
	"sort"
)

// AddedToken is an entry of tokenizer.json's "added_tokens": a token matched
// in the raw text before normalization (unless Normalized) and before the
// model ever sees it.
type AddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"` // only where not inside a word
	LStrip     bool   `json:"lstrip"`      // swallows whitespace on its left
	RStrip     bool   `json:"rstrip"`      // swallows whitespace on its right
	Normalized bool   `json:"normalized"`  // matched in normalized text
	Special    bool   `json:"special"`
}

// addedMatcher finds added tokens leftmost-longest, as HF's Aho-Corasick
// automaton with MatchKind::LeftmostLongest does. Added vocabularies are
// small, so candidates are indexed by first byte and tried longest first.
type addedMatcher struct {
	toks    []AddedToken
	pattern []string // what is matched: the content, normalized if Normalized
	byFirst [256][]int
}

func newAddedMatcher(toks []AddedToken, patterns []string) *addedMatcher {
	a := &addedMatcher{toks: toks, pattern: patterns}
	for i, p := range patterns {
		if p == "" {
			continue
		}
		a.byFirst[p[0]] = append(a.byFirst[p[0]], i)
	}
	for b := range a.byFirst {
		c := a.byFirst[b]
		sort.SliceStable(c, func(x, y int) bool { return len(patterns[c[x]]) > len(patterns[c[y]]) })
	}
	return a
}

func (a *addedMatcher) empty() bool { return a == nil || len(a.toks) == 0 }

// piece is a part of the input: text for the model, or an added token id.
type piece struct {
	text string
	id   int // -1 for text
}

// split cuts s around the added tokens found in it, honouring single_word,
// lstrip and rstrip exactly as HF's AddedVocabulary::find_matches does, and
// appends the non-empty parts to out.
func (a *addedMatcher) split(s string, out []piece) []piece {
	if a.empty() || s == "" {
		if s != "" {
			out = append(out, piece{s, -1})
		}
		return out
	}
	startOffset := 0
	for i := 0; i < len(s); {
		cands := a.byFirst[s[i]]
		found := -1
		for _, k := range cands {
			p := a.pattern[k]
			if len(s)-i >= len(p) && s[i:i+len(p)] == p {
				found = k
				break
			}
		}
		if found < 0 {
			i++
			continue
		}
		start, stop := i, i+len(a.pattern[found])
		i = stop // matches never overlap, whatever the flags do below
		tok := &a.toks[found]
		if tok.SingleWord {
			startSpace := start == 0 || !endsWithWord(s[:start])
			stopSpace := stop == len(s) || !startsWithWord(s[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if tok.LStrip {
			start = max(leadingSpaceOfTail(s[:start]), startOffset)
		}
		if tok.RStrip {
			stop += spacePrefixLen(s[stop:])
		}
		if startOffset < start {
			out = append(out, piece{s[startOffset:start], -1})
		}
		out = append(out, piece{s[start:stop], tok.ID})
		startOffset = stop
	}
	if startOffset < len(s) {
		out = append(out, piece{s[startOffset:], -1})
	}
	return out
}

func endsWithWord(s string) bool {
	if s == "" {
		return false
	}
	r, _ := lastRune(s)
	return isWord(r)
}

func startsWithWord(s string) bool {
	if s == "" {
		return false
	}
	r, _ := decodeRune(s, 0)
	return isWord(r)
}

func lastRune(s string) (rune, int) {
	i := len(s) - 1
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	r, _ := decodeRune(s, i)
	return r, i
}

// leadingSpaceOfTail returns where the whitespace at the end of s begins.
func leadingSpaceOfTail(s string) int {
	end := len(s)
	for end > 0 {
		r, i := lastRune(s[:end])
		if !isS(r) {
			break
		}
		end = i
	}
	return end
}

// spacePrefixLen is the byte length of the whitespace at the start of s.
func spacePrefixLen(s string) int {
	i := 0
	for i < len(s) {
		r, n := decodeRune(s, i)
		if !isS(r) {
			break
		}
		i += n
	}
	return i
}
