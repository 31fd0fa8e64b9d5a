// Package retrieval is mempo's retrieval stage: it builds an index directory
// from a passage corpus (SQLite docstore, an on-disk BM25 index, an optional
// FAISS dense index, index.json) in bounded memory, searches it in process, and
// serves it over HTTP with the Search-R1 /retrieve contract. A Go client with
// the same Searcher interface lets the rollout stage use either.
//
// Index directory layout:
//
//	index.json   Manifest: counts, parameters, build time, tool version
//	docs.sqlite  table docs(rowid, id, title, contents); rowid-1 is the row
//	bm25.len     document lengths; bm25.post postings; bm25.lex lexicon
//	dense.faiss  optional FAISS index (inner product); FAISS id = row
package retrieval

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mempo/mempo/lib/cli"
	"github.com/mempo/mempo/lib/faiss"
	"github.com/mempo/mempo/lib/fileio"
)

// ManifestFile is the name of the manifest inside an index directory.
const ManifestFile = "index.json"

const (
	denseFile    = "dense.faiss"
	formatString = "mempo-index/1"
)

// Manifest is index.json.
type Manifest struct {
	Format       string         `json:"format"`
	ToolVersion  string         `json:"tool_version"`
	BuiltAt      string         `json:"built_at"`
	BuildSeconds float64        `json:"build_seconds"`
	Corpus       string         `json:"corpus"`
	Docs         int64          `json:"docs"`
	Analyzer     Analyzer       `json:"analyzer"`
	BM25         BM25Params     `json:"bm25"`
	BM25Stats    BM25Stats      `json:"bm25_stats"`
	Dense        *DenseManifest `json:"dense,omitempty"`
	CPUSeconds   float64        `json:"cpu_seconds,omitempty"` // user+system CPU of the building process
	PeakRSSBytes int64          `json:"peak_rss_bytes,omitempty"`
	// Files holds the size and checksum of every other file of the
	// directory, checked by Open (integrity.go).
	Files map[string]FileSum `json:"files,omitempty"`
}

// DenseManifest describes dense.faiss.
type DenseManifest struct {
	File    string `json:"file"`
	Factory string `json:"factory,omitempty"`
	Source  string `json:"source"` // "built from <embeddings>" or "adopted <file>"
	Dim     int    `json:"dim"`
	Ntotal  int64  `json:"ntotal"`
	Metric  string `json:"metric"`
}

// BuildOptions configure Build.
type BuildOptions struct {
	Corpus   string
	Out      string
	Analyzer Analyzer
	BM25     BM25Params
	// RunBytes bounds the memory of buffered postings (default 64 MiB).
	RunBytes int
	// Embeddings (.npy float32 [N,d] or Parquet with a list<float> column)
	// and Faiss (an index_factory string, default "Flat") build dense.faiss.
	Embeddings       string
	EmbeddingsColumn string
	Faiss            string
	// TrainSize bounds the vectors used to train IVF/PQ indexes.
	TrainSize int
	// FaissRead adopts an existing FAISS index file (e.g. Search-R1's
	// e5_Flat.index) whose row i is corpus row i.
	FaissRead string
	Progress  *cli.Progress
	// Log receives one plain line per phase when not nil.
	Log io.Writer
}

// Build writes a complete index directory at opts.Out. It builds in a
// temporary directory beside Out and renames it into place only when every
// part is written, so a failed build leaves an existing index untouched.
func Build(ctx context.Context, opts BuildOptions) (*Manifest, error) {
	if opts.Corpus == "" || opts.Out == "" {
		return nil, fmt.Errorf("both a corpus and an output directory are needed")
	}
	if opts.BM25 == (BM25Params{}) {
		opts.BM25 = DefaultBM25
	}
	if opts.BM25.K1 < 0 || opts.BM25.B < 0 || opts.BM25.B > 1 {
		return nil, fmt.Errorf("bm25 parameters k1=%g b=%g out of range (k1 ≥ 0, 0 ≤ b ≤ 1)", opts.BM25.K1, opts.BM25.B)
	}
	if opts.RunBytes <= 0 {
		opts.RunBytes = 64 << 20
	}
	if opts.Embeddings != "" && opts.FaissRead != "" {
		return nil, fmt.Errorf("--embeddings and --faiss-read exclude each other")
	}
	if _, err := os.Stat(opts.Corpus); err != nil && opts.Corpus != "-" {
		return nil, fmt.Errorf("%s: %w", opts.Corpus, unwrapPath(err))
	}
	start := time.Now()
	tmp, err := fileio.TempDirBeside(opts.Out)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			fileio.RemoveTempDir(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes it 0700
		return nil, err
	}
	m := &Manifest{Format: formatString, ToolVersion: cli.Version, Corpus: opts.Corpus,
		Analyzer: opts.Analyzer, BM25: opts.BM25}
	logf := func(format string, args ...any) {
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, format+"\n", args...)
		}
	}

	dw, err := createDocStore(filepath.Join(tmp, docstoreFile))
	if err != nil {
		return nil, err
	}
	bb, err := newBM25Builder(tmp, opts.Analyzer, opts.RunBytes)
	if err != nil {
		dw.abort()
		return nil, err
	}
	var total int64
	known := false
	if opts.Progress != nil {
		total, known = corpusRows(opts.Corpus)
	}
	err = EachPassage(opts.Corpus, func(row int, p Passage) error {
		if row%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			opts.Progress.Printf("%s", countLine("indexing", int64(row), total, known, start))
		}
		title, _ := SplitContents(p.Contents)
		if err := dw.add(p.ID, title, p.Contents); err != nil {
			return err
		}
		return bb.add(p.Contents)
	})
	if err != nil {
		dw.abort()
		bb.abort()
		return nil, err
	}
	if err := dw.close(); err != nil {
		bb.abort()
		return nil, err
	}
	m.Docs = dw.n
	if m.Docs == 0 {
		bb.abort()
		return nil, fmt.Errorf("%s: no passages", opts.Corpus)
	}
	logf("docstore: %d passages (%.1fs)", m.Docs, time.Since(start).Seconds())
	if m.BM25Stats, err = bb.finish(); err != nil {
		return nil, fmt.Errorf("bm25: %w", err)
	}
	// The pass's status line is cleared here; the "indexed" line is printed
	// only once the whole index is in place, so a failure in the dense stage
	// still ends the run with its one error line.
	opts.Progress.Done("")
	logf("bm25: %d terms, %d postings, %d runs (%.1fs)", m.BM25Stats.Terms, m.BM25Stats.Postings, m.BM25Stats.Runs, time.Since(start).Seconds())

	switch {
	case opts.Embeddings != "":
		if m.Dense, err = buildDense(opts, tmp, m.Docs); err != nil {
			return nil, err
		}
		logf("dense: %s over %d×%d (%.1fs)", m.Dense.Factory, m.Dense.Ntotal, m.Dense.Dim, time.Since(start).Seconds())
	case opts.FaissRead != "":
		if m.Dense, err = adoptDense(opts.FaissRead, tmp, m.Docs); err != nil {
			return nil, err
		}
		logf("dense: adopted %s (%d×%d)", opts.FaissRead, m.Dense.Ntotal, m.Dense.Dim)
	}

	m.BuiltAt = time.Now().UTC().Format(time.RFC3339)
	m.BuildSeconds = time.Since(start).Seconds()
	m.PeakRSSBytes = PeakRSS()
	m.CPUSeconds = CPUTime().Seconds()
	if m.Files, err = sumDir(tmp); err != nil {
		return nil, err
	}
	raw, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, ManifestFile), append(raw, '\n'), 0o644); err != nil {
		return nil, err
	}
	if err := fileio.ReplaceDir(tmp, opts.Out); err != nil {
		return nil, err
	}
	ok = true
	opts.Progress.Done("indexed %d passages", m.Docs)
	return m, nil
}

func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// PeakRSS is the process's peak resident set size (VmHWM) in bytes, 0 when
// unknown.
func PeakRSS() int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:")), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}

// CPUTime is the user+system CPU time the process has used so far.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Index is an opened index directory.
type Index struct {
	Dir      string
	Manifest Manifest
	Docs     *DocStore
	BM25     *BM25
	Dense    *faiss.Index // nil without a dense index
	// VectorSearch, when set, answers dense searches instead of Dense (the
	// GPU flat search of gpusearch.go).
	VectorSearch VectorSearcher
}

// Open opens an index directory: the manifest, the docstore (queried on
// demand, not loaded), the memory-mapped BM25 files and, when present, the
// FAISS index (read into memory, as FAISS does). Every file is checked
// against the sizes index.json records, the BM25 files against their
// checksums too, the lexicon entry by entry and the counts against each
// other, so a damaged index fails here with the file's name rather than in
// a query (Verify checks the remaining checksums).
func Open(dir string) (*Index, error) {
	raw, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("%s: not an index directory: %w", dir, unwrapPath(err))
	}
	ix := &Index{Dir: dir}
	if err := json.Unmarshal(raw, &ix.Manifest); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ManifestFile), err)
	}
	if ix.Manifest.Format != formatString {
		return nil, fmt.Errorf("%s: format %q, want %q", filepath.Join(dir, ManifestFile), ix.Manifest.Format, formatString)
	}
	if err := checkSizes(dir, ix.Manifest.Files); err != nil {
		return nil, err
	}
	if ix.Docs, err = openDocStore(filepath.Join(dir, docstoreFile)); err != nil {
		return nil, err
	}
	if ix.BM25, err = openBM25(dir, ix.Manifest.Analyzer, ix.Manifest.BM25, ix.Manifest.BM25Stats.AvgDL); err != nil {
		ix.Close()
		return nil, err
	}
	if err := ix.checkBM25(); err != nil {
		ix.Close()
		return nil, err
	}
	if int64(ix.BM25.n) != ix.Docs.Len() || ix.Docs.Len() != ix.Manifest.Docs {
		ix.Close()
		return nil, fmt.Errorf("%s: bm25 has %d documents, docstore %d, index.json %d", dir, ix.BM25.n, ix.Docs.Len(), ix.Manifest.Docs)
	}
	if ix.Manifest.Dense != nil {
		if ix.Dense, err = faiss.Read(filepath.Join(dir, ix.Manifest.Dense.File)); err != nil {
			ix.Close()
			return nil, err
		}
		if ix.Dense.Ntotal() != ix.Manifest.Dense.Ntotal || ix.Dense.D() != ix.Manifest.Dense.Dim {
			ix.Close()
			return nil, fmt.Errorf("%s: %d vectors of %d dimensions, index.json records %d of %d", filepath.Join(dir, ix.Manifest.Dense.File),
				ix.Dense.Ntotal(), ix.Dense.D(), ix.Manifest.Dense.Ntotal, ix.Manifest.Dense.Dim)
		}
	}
	return ix, nil
}

// Close releases everything.
func (ix *Index) Close() error {
	if ix.Dense != nil {
		ix.Dense.Close()
	}
	if ix.BM25 != nil {
		ix.BM25.Close()
	}
	if ix.Docs != nil {
		ix.Docs.Close()
	}
	return nil
}

// Hit is one retrieved passage.
type Hit struct {
	Row      int64   `json:"-"` // internal row number (docstore, BM25 and FAISS id)
	ID       string  `json:"id"`
	Title    string  `json:"title"`
	Contents string  `json:"contents"`
	Score    float64 `json:"score"`
}

// hits fills Hits for scored rows with one docstore query.
func (ix *Index) hits(scored [][]ScoredDoc) ([][]Hit, error) {
	var rows []int64
	for _, s := range scored {
		for _, d := range s {
			rows = append(rows, d.Row)
		}
	}
	docs, err := ix.Docs.GetMany(rows)
	if err != nil {
		return nil, err
	}
	out := make([][]Hit, len(scored))
	i := 0
	for q, s := range scored {
		out[q] = make([]Hit, len(s))
		for j, d := range s {
			out[q][j] = Hit{Row: d.Row, ID: docs[i].ID, Title: docs[i].Title, Contents: docs[i].Contents, Score: float64(d.Score)}
			i++
		}
	}
	return out, nil
}

// SearchBM25 returns the top k passages of each query by BM25.
func (ix *Index) SearchBM25(queries []string, k int) ([][]Hit, error) {
	scored := make([][]ScoredDoc, len(queries))
	for i, q := range queries {
		scored[i] = ix.BM25.Search(q, k)
	}
	return ix.hits(scored)
}

// SearchDense returns the top k passages of each query vector by inner
// product; all vectors go to FAISS in one batch.
func (ix *Index) SearchDense(vectors [][]float32, k int) ([][]Hit, error) {
	if ix.Dense == nil {
		return nil, fmt.Errorf("index %s has no dense index", ix.Dir)
	}
	d := ix.Dense.D()
	flat := make([]float32, 0, len(vectors)*d)
	for i, v := range vectors {
		if len(v) != d {
			return nil, fmt.Errorf("query vector %d has %d dimensions, the index %d", i, len(v), d)
		}
		flat = append(flat, v...)
	}
	if len(vectors) == 0 {
		return nil, nil
	}
	search := ix.Dense.Search
	if ix.VectorSearch != nil {
		search = ix.VectorSearch.Search
	}
	dist, ids, err := search(flat, k)
	if err != nil {
		return nil, err
	}
	scored := make([][]ScoredDoc, len(vectors))
	for q := range vectors {
		for j := 0; j < k; j++ {
			if id := ids[q*k+j]; id >= 0 {
				scored[q] = append(scored[q], ScoredDoc{Row: id, Score: dist[q*k+j]})
			}
		}
	}
	return ix.hits(scored)
}
