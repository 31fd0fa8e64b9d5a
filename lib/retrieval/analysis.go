package retrieval

import (
	"unicode"
	"unicode/utf8"
)

// Analyzer turns text into index terms the way Lucene's English analysis does,
// close enough for pyserini-like BM25: split on anything that is not a letter
// or digit, lowercase, drop the possessive "'s", then optionally drop Lucene's
// 33 English stopwords and apply the Porter stemmer.
type Analyzer struct {
	Stopwords bool `json:"stopwords"`
	Stem      bool `json:"stem"`
}

// DefaultAnalyzer is what mempo-index uses unless told otherwise (the setting
// that measured best on HotpotQA recall; see docs/BENCHMARKS.md).
var DefaultAnalyzer = Analyzer{Stopwords: true, Stem: true}

// englishStopwords is Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET.
var englishStopwords = map[string]bool{}

func init() {
	for _, w := range []string{"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into",
		"is", "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
		"they", "this", "to", "was", "will", "with"} {
		englishStopwords[w] = true
	}
}

// maxTermBytes bounds one term; longer runs of letters are cut (Lucene's
// StandardTokenizer splits at 255 characters).
const maxTermBytes = 255

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// Analyze appends the terms of text to dst and returns it.
func (a Analyzer) Analyze(text string, dst []string) []string {
	var buf []byte
	flush := func() {
		if len(buf) == 0 {
			return
		}
		t := string(buf)
		buf = buf[:0]
		if a.Stopwords && englishStopwords[t] {
			return
		}
		if a.Stem {
			t = PorterStem(t)
		}
		dst = append(dst, t)
	}
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
				if len(buf) < maxTermBytes {
					buf = append(buf, c)
				}
			case c >= 'A' && c <= 'Z':
				if len(buf) < maxTermBytes {
					buf = append(buf, c+('a'-'A'))
				}
			case c == '\'' && len(buf) > 0 && possessive(text, i+1):
				flush()
				i += 2 // skip "'s"
				continue
			default:
				flush()
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		if r == '’' && len(buf) > 0 && possessive(text, i+size) {
			flush()
			i += size + 1
			continue
		}
		if isWordRune(r) {
			if len(buf)+utf8.UTFMax <= maxTermBytes {
				buf = utf8.AppendRune(buf, unicode.ToLower(r))
			}
		} else {
			flush()
		}
		i += size
	}
	flush()
	return dst
}

// possessive reports whether text[i:] starts with "s" or "S" that ends a word.
func possessive(text string, i int) bool {
	if i >= len(text) || (text[i] != 's' && text[i] != 'S') {
		return false
	}
	if i+1 == len(text) {
		return true
	}
	r, _ := utf8.DecodeRuneInString(text[i+1:])
	return !isWordRune(r)
}
