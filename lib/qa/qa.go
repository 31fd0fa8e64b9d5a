// Package qa scores question answering: SQuAD/Search-R1 answer normalization,
// exact match, bag-of-words F1 and substring EM against gold aliases, and
// multi-objective tasks whose k answers arrive as one ";"-separated <answer>.
//
// Normalize follows Search-R1's normalize_answer (itself SQuAD's): lowercase,
// delete ASCII punctuation, delete the words a/an/the, collapse whitespace.
// "Lowercase", "word" and "whitespace" are taken in Python 3's sense (str.lower
// with its final-sigma rule, re's \w, str.split), so non-ASCII text normalizes
// as in the reference scripts. EM, sub-EM and F1 match Search-R1's qa_em.py,
// SQuAD v1.1's and HotpotQA's evaluation scripts exactly, selected by Style
// (testdata/scoring_golden.jsonl, written by scripts/make_scoring_golden.py
// from the scripts themselves, is the check).
package qa

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// asciiPunct is Python's string.punctuation.
const asciiPunct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"

func isASCIIPunct(r rune) bool { return r < utf8.RuneSelf && strings.ContainsRune(asciiPunct, r) }

// isWord is Python's \w for str patterns: Unicode letters and numbers, and '_'
// (which normalization has already removed).
func isWord(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) }

// isSpace is Python's str.isspace: Unicode white space plus the ASCII
// information separators U+001C..U+001F.
func isSpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// lower is Python's str.lower: the full Unicode lower-case mapping, with
// U+0130 (İ) to "i" + U+0307 and Σ to ς at the end of a word. Go's
// strings.ToLower maps rune by rune and so misses the final-sigma rule
// ("ΣΑΣ" is "σας" in Python); x/text/cases implements both. ASCII takes the
// fast path. A Caser keeps state, so each call makes its own.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return cases.Lower(language.Und).String(s)
		}
	}
	return strings.ToLower(s)
}

// Normalize is the SQuAD/Search-R1 answer normalization: lowercase, drop
// ASCII punctuation, drop the articles a, an, the where they stand as whole
// words, and collapse runs of white space to single spaces (trimmed).
// Unicode punctuation (’ – «) is kept, as in the reference.
func Normalize(s string) string {
	s = lower(s)
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if !isASCIIPunct(r) {
			b.WriteRune(r)
		}
	}
	s = b.String()
	// Remove whole-word articles: a maximal run of word characters equal to
	// a/an/the becomes a space (Python: re.sub(r"\b(a|an|the)\b", " ", s)).
	b.Reset()
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isWord(r) {
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		j := i
		for j < len(s) {
			r2, n2 := utf8.DecodeRuneInString(s[j:])
			if !isWord(r2) {
				break
			}
			j += n2
		}
		switch w := s[i:j]; w {
		case "a", "an", "the":
			b.WriteByte(' ')
		default:
			b.WriteString(w)
		}
		i = j
	}
	return strings.Join(strings.FieldsFunc(b.String(), isSpace), " ")
}

// Tokens is the normalized answer split into words.
func Tokens(s string) []string { return strings.FieldsFunc(Normalize(s), isSpace) }

// ExactMatch is 1 when the normalized prediction equals some normalized gold
// alias, else 0. No golds scores 0.
func ExactMatch(pred string, golds []string) float64 {
	p := Normalize(pred)
	for _, g := range golds {
		if Normalize(g) == p {
			return 1
		}
	}
	return 0
}

// SubEM is Search-R1's subem_check: 1 when some normalized gold alias occurs
// as a substring of the normalized prediction, else 0. As there, a gold that
// normalizes to nothing (e.g. "The") matches every prediction: the empty
// string is a substring of everything. HotpotQA defines no sub-EM, so both
// styles use this one.
func SubEM(pred string, golds []string) float64 {
	p := Normalize(pred)
	for _, g := range golds {
		if strings.Contains(p, Normalize(g)) {
			return 1
		}
	}
	return 0
}

// F1 is F1Style under the default style, SearchR1.
func F1(pred string, golds []string) float64 { return F1Style(pred, golds, SearchR1) }

// F1Style is the bag-of-words F1 (tokens counted with multiplicity) between
// the normalized prediction and each normalized gold alias, maximized over the
// aliases as SQuAD's metric_max_over_ground_truths does. No tokens in common
// scores 0, so an answer and a gold that both normalize to nothing score 0
// (SQuAD v1.1 and HotpotQA; SQuAD v2's "both empty is 1" is not used). Under
// HotpotQA, when either side normalizes to yes, no or noanswer and the two
// differ, the score is 0 ("yes it is" against "yes"). No golds scores 0.
func F1Style(pred string, golds []string, style Style) float64 {
	np := Normalize(pred)
	pt := strings.FieldsFunc(np, isSpace)
	best := 0.0
	for _, g := range golds {
		ng := Normalize(g)
		if style == HotpotQA && np != ng && (isYesNo(np) || isYesNo(ng)) {
			continue
		}
		if f := tokenF1(pt, strings.FieldsFunc(ng, isSpace)); f > best {
			best = f
		}
	}
	return best
}

func isYesNo(s string) bool { return s == "yes" || s == "no" || s == "noanswer" }

func tokenF1(pred, gold []string) float64 {
	counts := make(map[string]int, len(gold))
	for _, t := range gold {
		counts[t]++
	}
	common := 0
	for _, t := range pred {
		if counts[t] > 0 {
			counts[t]--
			common++
		}
	}
	if common == 0 {
		return 0
	}
	p := float64(common) / float64(len(pred))
	r := float64(common) / float64(len(gold))
	return 2 * p * r / (p + r)
}

// SplitAnswers splits the text of a final <answer> into its ";"-separated
// parts, each trimmed of white space, and reports whether there are exactly k
// of them. Blank text has no parts. An empty part ("a; ; c") still counts as a
// part (it scores 0 on its objective); the format check of the rollout stage
// is where empty parts are rejected. The parts are returned even when the
// count is wrong, so they can be logged.
//
// A part numbered with its own position, "(2) Paris" or "[2] Paris" as the
// second part, is read without the number: policies often number their
// answers, and the generated world's expert does ("[1] Quovex; [2] Oston").
// A number that is not the part's position is kept ("(3) Paris" as the
// second part is an answer that says "(3)").
func SplitAnswers(answerText string, k int) (parts []string, ok bool) {
	if strings.TrimFunc(answerText, isSpace) == "" {
		return nil, k == 0
	}
	raw := strings.Split(answerText, ";")
	parts = make([]string, len(raw))
	for i, p := range raw {
		p = strings.TrimFunc(p, isSpace)
		n := strconv.Itoa(i + 1)
		for _, m := range []string{"(" + n + ")", "[" + n + "]"} {
			if rest, found := strings.CutPrefix(p, m); found && (rest == "" || isSpace(rune(rest[0]))) {
				p = strings.TrimFunc(rest, isSpace)
				break
			}
		}
		parts[i] = p
	}
	return parts, len(parts) == k
}

// TaskScore is the per-objective scoring of one multi-objective answer.
type TaskScore struct {
	EM, F1, SubEM []float64 // one per objective, each 0..1
	AllCorrect    bool      // every objective exact-matches (and k ≥ 1)
	CountOK       bool      // the number of answers equals the number of objectives
}

// Score is ScoreStyle under the default style, SearchR1.
func Score(answers []string, golds [][]string) TaskScore { return ScoreStyle(answers, golds, SearchR1) }

// ScoreStyle aligns answers with the gold alias lists by position and scores
// each objective. A prediction with the wrong number of answers scores 0 on
// every objective.
func ScoreStyle(answers []string, golds [][]string, style Style) TaskScore {
	k := len(golds)
	s := TaskScore{EM: make([]float64, k), F1: make([]float64, k), SubEM: make([]float64, k)}
	if len(answers) != k {
		return s
	}
	s.CountOK = true
	s.AllCorrect = k > 0
	for i, g := range golds {
		s.EM[i] = ExactMatch(answers[i], g)
		s.F1[i] = F1Style(answers[i], g, style)
		s.SubEM[i] = SubEM(answers[i], g)
		if s.EM[i] != 1 {
			s.AllCorrect = false
		}
	}
	return s
}

// ScoreTask is ScoreStyle reduced to what the rollout stage stores:
// per-objective EM and F1 and whether every objective is exactly right.
func ScoreTask(answers []string, golds [][]string, style Style) (em, f1 []float64, allCorrect bool) {
	s := ScoreStyle(answers, golds, style)
	return s.EM, s.F1, s.AllCorrect
}

// Mean is the average of xs (0 for none).
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

// ExtractAnswer returns the text inside the last <answer>…</answer> of one
// model output (a step's generated text, never the prompt), and whether there
// was one. The text is returned untrimmed of inner content but with outer
// white space removed.
func ExtractAnswer(output string) (string, bool) {
	end := strings.LastIndex(output, "</answer>")
	if end < 0 {
		return "", false
	}
	start := strings.LastIndex(output[:end], "<answer>")
	if start < 0 {
		return "", false
	}
	return strings.TrimFunc(output[start+len("<answer>"):end], isSpace), true
}
