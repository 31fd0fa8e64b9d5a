package retrieval

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"

	"github.com/mempo/mempo/lib/fileio"
)

// SynthesizeCorpus writes n passages made by repeating and perturbing real
// ones, for scale tests: copy c of source passage p keeps p's title with a
// " (variant c)" suffix and its text with about 10% of the words changed
// (dropped, swapped with a neighbour, or replaced by a word drawn from the
// whole source vocabulary) and a few per-copy tokens added, so postings, the
// vocabulary and document lengths grow as they would with more real text.
// Ids are the row numbers, as in wiki-18.
func SynthesizeCorpus(w io.Writer, sources []Passage, n int, seed uint64) error {
	if len(sources) == 0 {
		return fmt.Errorf("synthesize: no source passages")
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	type src struct {
		title string
		words []string
	}
	srcs := make([]src, len(sources))
	var vocab []string
	for i, p := range sources {
		title, text := SplitContents(p.Contents)
		srcs[i] = src{title: title, words: strings.Fields(text)}
		vocab = append(vocab, srcs[i].words...)
	}
	out := fileio.NewJSONLWriter(w)
	var b strings.Builder
	for i := 0; i < n; i++ {
		s := srcs[i%len(srcs)]
		copyNo := i / len(srcs)
		b.Reset()
		if copyNo == 0 {
			b.WriteString("\"" + s.title + "\"\n")
		} else {
			fmt.Fprintf(&b, "\"%s (variant %d)\"\n", s.title, copyNo)
		}
		words := append([]string(nil), s.words...)
		if copyNo > 0 {
			for j := range words {
				switch r := rng.IntN(30); {
				case r == 0:
					words[j] = ""
				case r == 1 && j+1 < len(words):
					words[j], words[j+1] = words[j+1], words[j]
				case r == 2:
					words[j] = vocab[rng.IntN(len(vocab))]
				}
			}
			words = append(words, fmt.Sprintf("v%dx%d", copyNo, rng.IntN(1000)))
		}
		first := true
		for _, x := range words {
			if x == "" {
				continue
			}
			if !first {
				b.WriteByte(' ')
			}
			b.WriteString(x)
			first = false
		}
		if err := out.Write(Passage{ID: fmt.Sprint(i), Contents: b.String()}); err != nil {
			return err
		}
	}
	return out.Flush()
}
