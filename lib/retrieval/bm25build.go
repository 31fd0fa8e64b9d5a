package retrieval

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// On-disk BM25 files (little-endian):
//
//	bm25.len   uint32 length (terms) of each document, by row
//	bm25.post  postings of every term, one after another: per posting a uvarint
//	           document delta (from the previous posting of the term, the first
//	           from 0) and a uvarint term frequency
//	bm25.lex   the lexicon sorted by term: header "MBM25LX1", uint64 V, then V
//	           entries {uint64 string offset, uint64 postings offset, uint64
//	           postings bytes, uint32 df, uint32 string length}, then the term
//	           strings
//
// The postings are built in bounded memory: postings accumulate in a run
// buffer, are spilled to a run file when the buffer is full (terms in id order,
// documents ascending), and the runs are concatenated term by term at the end
// (each run covers a later range of documents, so no sort is needed).
const (
	bm25LenFile  = "bm25.len"
	bm25PostFile = "bm25.post"
	bm25LexFile  = "bm25.lex"
	lexMagic     = "MBM25LX1"
	lexEntrySize = 40
)

type bm25Builder struct {
	dir      string
	an       Analyzer
	vocab    map[string]uint32
	terms    []string
	df       []uint32
	runLimit int // postings per run

	// current run: per-term linked lists of postings
	head, tail []int32
	pdoc       []uint32
	ptf        []uint16
	pnext      []int32
	runs       []string

	lenW     *bufio.Writer
	lenF     *os.File
	docs     uint32
	tokens   uint64
	postings uint64

	scratch []string
	tf      map[uint32]uint32
}

func newBM25Builder(dir string, an Analyzer, runBytes int) (*bm25Builder, error) {
	f, err := os.Create(filepath.Join(dir, bm25LenFile))
	if err != nil {
		return nil, err
	}
	limit := runBytes / 10 // bytes per buffered posting: doc 4, tf 2, next 4
	if limit < 1024 {
		limit = 1024
	}
	return &bm25Builder{dir: dir, an: an, vocab: make(map[string]uint32), runLimit: limit,
		lenF: f, lenW: bufio.NewWriterSize(f, 1<<20), tf: make(map[uint32]uint32)}, nil
}

func (b *bm25Builder) add(text string) error {
	b.scratch = b.an.Analyze(text, b.scratch[:0])
	clear(b.tf)
	for _, t := range b.scratch {
		id, ok := b.vocab[t]
		if !ok {
			id = uint32(len(b.terms))
			b.vocab[t] = id
			b.terms = append(b.terms, t)
			b.df = append(b.df, 0)
			b.head = append(b.head, -1)
			b.tail = append(b.tail, -1)
		}
		b.tf[id]++
	}
	if b.pdoc == nil {
		// Full capacity at once: appends never double past the limit (the
		// pages are only touched, and counted in RSS, as postings arrive).
		b.pdoc = make([]uint32, 0, b.runLimit+1024)
		b.ptf = make([]uint16, 0, b.runLimit+1024)
		b.pnext = make([]int32, 0, b.runLimit+1024)
	}
	doc := b.docs
	for id, tf := range b.tf {
		if tf > 65535 {
			tf = 65535
		}
		p := int32(len(b.pdoc))
		b.pdoc = append(b.pdoc, doc)
		b.ptf = append(b.ptf, uint16(tf))
		b.pnext = append(b.pnext, -1)
		if b.tail[id] < 0 {
			b.head[id] = p
		} else {
			b.pnext[b.tail[id]] = p
		}
		b.tail[id] = p
		b.df[id]++
	}
	var lb [4]byte
	binary.LittleEndian.PutUint32(lb[:], uint32(len(b.scratch)))
	if _, err := b.lenW.Write(lb[:]); err != nil {
		return err
	}
	b.docs++
	b.tokens += uint64(len(b.scratch))
	b.postings += uint64(len(b.tf))
	if len(b.pdoc) >= b.runLimit {
		return b.spill()
	}
	return nil
}

// spill writes the current run: for each term with postings, in term-id
// order, uvarint term id, uvarint count, then (uvarint doc delta, uvarint tf).
func (b *bm25Builder) spill() error {
	if len(b.pdoc) == 0 {
		return nil
	}
	path := filepath.Join(b.dir, fmt.Sprintf(".run-%04d", len(b.runs)))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var vb [binary.MaxVarintLen64]byte
	put := func(v uint64) { w.Write(vb[:binary.PutUvarint(vb[:], v)]) }
	for id := range b.head {
		p := b.head[id]
		if p < 0 {
			continue
		}
		n := 0
		for q := p; q >= 0; q = b.pnext[q] {
			n++
		}
		put(uint64(id))
		put(uint64(n))
		prev := uint32(0)
		for q := p; q >= 0; q = b.pnext[q] {
			put(uint64(b.pdoc[q] - prev))
			put(uint64(b.ptf[q]))
			prev = b.pdoc[q]
		}
		b.head[id], b.tail[id] = -1, -1
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	b.runs = append(b.runs, path)
	b.pdoc, b.ptf, b.pnext = b.pdoc[:0], b.ptf[:0], b.pnext[:0]
	return nil
}

type runReader struct {
	r       *bufio.Reader
	f       *os.File
	term    int64 // next term id in this run, -1 at end
	n       uint64
	lastDoc uint32
}

func (rr *runReader) advance() error {
	t, err := binary.ReadUvarint(rr.r)
	if err == io.EOF {
		rr.term = -1
		return nil
	}
	if err != nil {
		return err
	}
	n, err := binary.ReadUvarint(rr.r)
	if err != nil {
		return err
	}
	rr.term, rr.n = int64(t), n
	return nil
}

// BM25Stats describes a built BM25 index.
type BM25Stats struct {
	Docs     uint32  `json:"docs"`
	Terms    int     `json:"terms"`
	Postings uint64  `json:"postings"`
	Tokens   uint64  `json:"tokens"`
	AvgDL    float64 `json:"avgdl"`
	Runs     int     `json:"runs"`
}

// finish merges the runs into bm25.post and writes bm25.lex.
func (b *bm25Builder) finish() (BM25Stats, error) {
	st := BM25Stats{Docs: b.docs, Terms: len(b.terms), Postings: b.postings, Tokens: b.tokens}
	if b.docs > 0 {
		st.AvgDL = float64(b.tokens) / float64(b.docs)
	}
	if err := b.lenW.Flush(); err != nil {
		return st, err
	}
	if err := b.lenF.Close(); err != nil {
		return st, err
	}
	if err := b.spill(); err != nil {
		return st, err
	}
	b.pdoc, b.ptf, b.pnext, b.head, b.tail = nil, nil, nil, nil, nil
	st.Runs = len(b.runs)

	readers := make([]*runReader, len(b.runs))
	defer func() {
		for _, rr := range readers {
			if rr != nil {
				rr.f.Close()
			}
		}
		for _, p := range b.runs {
			os.Remove(p)
		}
	}()
	bufSize := 1 << 20
	if len(b.runs) > 64 {
		bufSize = 256 << 10
	}
	for i, p := range b.runs {
		f, err := os.Open(p)
		if err != nil {
			return st, err
		}
		readers[i] = &runReader{f: f, r: bufio.NewReaderSize(f, bufSize)}
		if err := readers[i].advance(); err != nil {
			return st, fmt.Errorf("%s: %w", p, err)
		}
	}

	pf, err := os.Create(filepath.Join(b.dir, bm25PostFile))
	if err != nil {
		return st, err
	}
	pw := bufio.NewWriterSize(pf, 4<<20)
	var vb [binary.MaxVarintLen64]byte
	var off uint64
	postOff := make([]uint64, len(b.terms))
	postLen := make([]uint64, len(b.terms))
	for id := range b.terms {
		start := off
		prev := uint32(0)
		for _, rr := range readers {
			if rr.term != int64(id) {
				continue
			}
			doc := uint32(0)
			for k := uint64(0); k < rr.n; k++ {
				d, err := binary.ReadUvarint(rr.r)
				if err != nil {
					pf.Close()
					return st, err
				}
				tf, err := binary.ReadUvarint(rr.r)
				if err != nil {
					pf.Close()
					return st, err
				}
				doc += uint32(d)
				n := binary.PutUvarint(vb[:], uint64(doc-prev))
				n += binary.PutUvarint(vb[n:], tf)
				pw.Write(vb[:n])
				off += uint64(n)
				prev = doc
			}
			if err := rr.advance(); err != nil {
				pf.Close()
				return st, err
			}
		}
		postOff[id], postLen[id] = start, off-start
	}
	if err := pw.Flush(); err != nil {
		pf.Close()
		return st, err
	}
	if err := pf.Close(); err != nil {
		return st, err
	}

	// Lexicon sorted by term.
	order := make([]uint32, len(b.terms))
	for i := range order {
		order[i] = uint32(i)
	}
	sort.Slice(order, func(i, j int) bool { return b.terms[order[i]] < b.terms[order[j]] })
	lf, err := os.Create(filepath.Join(b.dir, bm25LexFile))
	if err != nil {
		return st, err
	}
	lw := bufio.NewWriterSize(lf, 4<<20)
	lw.WriteString(lexMagic)
	binary.Write(lw, binary.LittleEndian, uint64(len(order)))
	var e [lexEntrySize]byte
	strOff := uint64(0)
	for _, id := range order {
		binary.LittleEndian.PutUint64(e[0:], strOff)
		binary.LittleEndian.PutUint64(e[8:], postOff[id])
		binary.LittleEndian.PutUint64(e[16:], postLen[id])
		binary.LittleEndian.PutUint32(e[24:], b.df[id])
		binary.LittleEndian.PutUint32(e[28:], uint32(len(b.terms[id])))
		lw.Write(e[:32])
		lw.Write(e[32:40]) // reserved
		strOff += uint64(len(b.terms[id]))
	}
	for _, id := range order {
		lw.WriteString(b.terms[id])
	}
	if err := lw.Flush(); err != nil {
		lf.Close()
		return st, err
	}
	return st, lf.Close()
}

func (b *bm25Builder) abort() {
	b.lenF.Close()
	for _, p := range b.runs {
		os.Remove(p)
	}
}
