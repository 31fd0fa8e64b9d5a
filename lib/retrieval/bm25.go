package retrieval

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"syscall"
)

// BM25Params are the scoring parameters (pyserini's defaults: k1 0.9, b 0.4).
type BM25Params struct {
	K1 float64 `json:"k1"`
	B  float64 `json:"b"`
}

// DefaultBM25 are pyserini's LuceneSearcher defaults.
var DefaultBM25 = BM25Params{K1: 0.9, B: 0.4}

// BM25 searches the memory-mapped postings of an index directory with
// term-at-a-time scoring:
//
//	score(d, q) = Σ_t qtf(t) · idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl))
//	idf(t)      = ln(1 + (N − df + 0.5)/(df + 0.5))
//
// It is safe for concurrent use.
type BM25 struct {
	an     Analyzer
	params BM25Params
	n      int
	avgdl  float64
	norm   []float32 // k1·(1 − b + b·dl/avgdl) per document
	lex    []byte    // mmapped bm25.lex
	post   []byte    // mmapped bm25.post
	nterms int
	strs   []byte
	lens   []byte // bm25.len as read, for its checksum
	// acc is a free list of score accumulators (N floats each); unlike a
	// sync.Pool it survives garbage collections, so large ones are not
	// reallocated and cleared again under load. At most cap(acc) exist, which
	// bounds both memory (84 MB each on wiki-18) and concurrent searches:
	// more callers wait for one to come back.
	acc     chan *accumulator
	accMu   sync.Mutex
	accMade int
}

func (s *BM25) getAcc() *accumulator {
	select {
	case a := <-s.acc:
		return a
	default:
	}
	s.accMu.Lock()
	if s.accMade < cap(s.acc) {
		s.accMade++
		s.accMu.Unlock()
		return &accumulator{score: make([]float32, s.n)}
	}
	s.accMu.Unlock()
	return <-s.acc
}

func mmapFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() == 0 {
		return []byte{}, nil
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	return b, nil
}

func openBM25(dir string, an Analyzer, params BM25Params, avgdl float64) (*BM25, error) {
	lens, err := os.ReadFile(filepath.Join(dir, bm25LenFile))
	if err != nil {
		return nil, err
	}
	if len(lens)%4 != 0 {
		return nil, fmt.Errorf("%s: %d bytes, not a whole number of 4-byte lengths (truncated)", filepath.Join(dir, bm25LenFile), len(lens))
	}
	s := &BM25{an: an, params: params, n: len(lens) / 4, avgdl: avgdl}
	if avgdl <= 0 {
		s.avgdl = 1
	}
	s.norm = make([]float32, s.n)
	for i := range s.norm {
		dl := float64(binary.LittleEndian.Uint32(lens[4*i:]))
		s.norm[i] = float32(params.K1 * (1 - params.B + params.B*dl/s.avgdl))
	}
	if s.lex, err = mmapFile(filepath.Join(dir, bm25LexFile)); err != nil {
		return nil, err
	}
	if len(s.lex) < 16 || string(s.lex[:8]) != lexMagic {
		s.Close()
		return nil, fmt.Errorf("%s: not a mempo BM25 lexicon", filepath.Join(dir, bm25LexFile))
	}
	s.nterms = int(binary.LittleEndian.Uint64(s.lex[8:]))
	if s.nterms < 0 || s.nterms > (len(s.lex)-16)/lexEntrySize {
		s.Close()
		return nil, fmt.Errorf("%s: truncated lexicon", filepath.Join(dir, bm25LexFile))
	}
	s.strs = s.lex[16+s.nterms*lexEntrySize:]
	if s.post, err = mmapFile(filepath.Join(dir, bm25PostFile)); err != nil {
		s.Close()
		return nil, err
	}
	s.lens = lens
	s.acc = make(chan *accumulator, 2*runtime.GOMAXPROCS(0))
	return s, nil
}

// Close unmaps the files.
func (s *BM25) Close() error {
	if len(s.lex) > 0 {
		syscall.Munmap(s.lex)
	}
	if len(s.post) > 0 {
		syscall.Munmap(s.post)
	}
	s.lex, s.post = nil, nil
	return nil
}

func (s *BM25) entry(i int) []byte { return s.lex[16+i*lexEntrySize : 16+(i+1)*lexEntrySize] }

func (s *BM25) term(i int) string {
	e := s.entry(i)
	off := binary.LittleEndian.Uint64(e[0:])
	n := binary.LittleEndian.Uint32(e[28:])
	return string(s.strs[off : off+uint64(n)])
}

// lookup finds a term's postings and document frequency.
func (s *BM25) lookup(t string) (post []byte, df uint32, ok bool) {
	i := sort.Search(s.nterms, func(i int) bool { return s.term(i) >= t })
	if i == s.nterms || s.term(i) != t {
		return nil, 0, false
	}
	e := s.entry(i)
	off := binary.LittleEndian.Uint64(e[8:])
	n := binary.LittleEndian.Uint64(e[16:])
	if off > uint64(len(s.post)) || n > uint64(len(s.post))-off {
		return nil, 0, false // checked at open (checkLexicon); never index past the mapping
	}
	return s.post[off : off+n], binary.LittleEndian.Uint32(e[24:]), true
}

// DocFreq is the number of documents containing the analyzed term t.
func (s *BM25) DocFreq(t string) int {
	_, df, _ := s.lookup(t)
	return int(df)
}

type accumulator struct {
	score   []float32
	touched []uint32
}

// ScoredDoc is a row number with its score.
type ScoredDoc struct {
	Row   int64
	Score float32
}

// Search returns the top k rows for a query (fewer when fewer documents match).
func (s *BM25) Search(query string, k int) []ScoredDoc {
	terms := s.an.Analyze(query, nil)
	if len(terms) == 0 || k <= 0 || s.n == 0 {
		return nil
	}
	qtf := map[string]int{}
	var uniq []string
	for _, t := range terms {
		if qtf[t] == 0 {
			uniq = append(uniq, t)
		}
		qtf[t]++
	}
	acc := s.getAcc()
	defer func() { s.acc <- acc }()
	k1p1 := float32(s.params.K1 + 1)
	for _, t := range uniq {
		post, df, ok := s.lookup(t)
		if !ok {
			continue
		}
		idf := math.Log(1 + (float64(s.n)-float64(df)+0.5)/(float64(df)+0.5))
		w := float32(idf*float64(qtf[t])) * k1p1
		doc := uint32(0)
		for i := 0; i < len(post); {
			// One-byte fast path: most gaps and term frequencies are < 128.
			var d, tf uint64
			if c := post[i]; c < 0x80 {
				d = uint64(c)
				i++
			} else {
				var n int
				if d, n = binary.Uvarint(post[i:]); n <= 0 {
					break // corrupt postings; stop this term
				}
				i += n
			}
			if i >= len(post) {
				break
			}
			if c := post[i]; c < 0x80 {
				tf = uint64(c)
				i++
			} else {
				var n int
				if tf, n = binary.Uvarint(post[i:]); n <= 0 {
					break
				}
				i += n
			}
			doc += uint32(d)
			if int(doc) >= len(acc.score) {
				break // corrupt postings
			}
			ftf := float32(tf)
			if acc.score[doc] == 0 {
				acc.touched = append(acc.touched, doc)
			}
			acc.score[doc] += w * ftf / (ftf + s.norm[doc])
		}
	}
	top := topDocs(acc, k)
	for _, d := range acc.touched {
		acc.score[d] = 0
	}
	acc.touched = acc.touched[:0]
	return top
}

// topDocs selects the k best touched documents (score desc, row asc) with a
// min-heap.
func topDocs(acc *accumulator, k int) []ScoredDoc {
	h := make([]ScoredDoc, 0, k)
	worse := func(a, b ScoredDoc) bool { // a ranks below b
		if a.Score != b.Score {
			return a.Score < b.Score
		}
		return a.Row > b.Row
	}
	for _, d := range acc.touched {
		c := ScoredDoc{Row: int64(d), Score: acc.score[d]}
		if len(h) < k {
			h = append(h, c)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if !worse(h[i], h[p]) {
					break
				}
				h[i], h[p] = h[p], h[i]
				i = p
			}
			continue
		}
		if !worse(h[0], c) {
			continue
		}
		h[0] = c
		for i := 0; ; {
			l, r, m := 2*i+1, 2*i+2, i
			if l < len(h) && worse(h[l], h[m]) {
				m = l
			}
			if r < len(h) && worse(h[r], h[m]) {
				m = r
			}
			if m == i {
				break
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	sort.Slice(h, func(i, j int) bool { return worse(h[j], h[i]) })
	return h
}
