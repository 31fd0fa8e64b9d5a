package retrieval

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/mempo/mempo/lib/faiss"
	"github.com/mempo/mempo/lib/fileio"
)

// QueryEncoder turns query strings into vectors for dense search (e.g. e5 with
// the "query: " prefix, mean pooling and L2 normalization, as Search-R1 does).
// The model stack provides one; until then dense requests carry
// "query_vectors".
type QueryEncoder interface {
	Encode(ctx context.Context, queries []string) ([][]float32, error)
	Dim() int
}

// vectorSource streams embedding rows.
type vectorSource interface {
	dim() int
	rows() int64     // -1 when unknown before reading
	next() []float32 // one row; nil at the end
	err() error
	close()
}

type npySource struct {
	path string
	f    *os.File
	r    *faiss.NPYReader
	buf  []float32
	e    error
}

func (s *npySource) dim() int    { return s.r.Dim }
func (s *npySource) rows() int64 { return s.r.Rows }
func (s *npySource) err() error  { return s.e }
func (s *npySource) close()      { s.f.Close() }
func (s *npySource) next() []float32 {
	if s.buf == nil {
		s.buf = make([]float32, s.r.Dim)
	}
	n, err := s.r.Next(s.buf)
	if n == 0 {
		if err != io.EOF {
			s.e = fmt.Errorf("%s: %w", s.path, err)
		}
		return nil
	}
	return s.buf
}

type parquetSource struct {
	path  string
	f     *os.File
	pf    *parquet.File
	col   int
	d     int
	rg    int
	rows_ parquet.Rows
	buf   []parquet.Row
	pos   int
	n     int
	row   int
	e     error
	out   []float32
}

func openParquetVectors(path, column string) (*parquetSource, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, unwrapPath(err))
	}
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: not a Parquet file: %w", path, err)
	}
	var leaf parquet.LeafColumn
	found := false
	for _, p := range [][]string{{column}, {column, "list", "element"}, {column, "list", "item"}, {column, "element"}} {
		if l, ok := pf.Schema().Lookup(p...); ok {
			leaf, found = l, true
			break
		}
	}
	if !found {
		f.Close()
		return nil, fileio.BadInput(path, 0, column, "column missing (set --embeddings-column)")
	}
	if k := leaf.Node.Type().Kind(); k != parquet.Float && k != parquet.Double {
		f.Close()
		return nil, fileio.BadInput(path, 0, column, "column type %v, want list<float>", leaf.Node.Type())
	}
	return &parquetSource{path: path, f: f, pf: pf, col: leaf.ColumnIndex, d: -1, buf: make([]parquet.Row, 64)}, nil
}

func (s *parquetSource) dim() int    { return s.d }
func (s *parquetSource) rows() int64 { return s.pf.NumRows() }
func (s *parquetSource) err() error  { return s.e }
func (s *parquetSource) close() {
	if s.rows_ != nil {
		s.rows_.Close()
	}
	s.f.Close()
}

func (s *parquetSource) next() []float32 {
	for s.pos >= s.n {
		if s.rows_ == nil {
			if s.rg >= len(s.pf.RowGroups()) {
				return nil
			}
			s.rows_ = s.pf.RowGroups()[s.rg].Rows()
			s.rg++
		}
		n, err := s.rows_.ReadRows(s.buf)
		s.pos, s.n = 0, n
		if err == io.EOF {
			s.rows_.Close()
			s.rows_ = nil
		} else if err != nil {
			s.e = fmt.Errorf("%s: row %d: %w", s.path, s.row+1, err)
			return nil
		}
	}
	r := s.buf[s.pos]
	s.pos++
	s.row++
	s.out = s.out[:0]
	for _, v := range r {
		if v.Column() != s.col || v.IsNull() {
			continue
		}
		if v.Kind() == parquet.Double {
			s.out = append(s.out, float32(v.Double()))
		} else {
			s.out = append(s.out, v.Float())
		}
	}
	if s.d < 0 {
		s.d = len(s.out)
		if s.d == 0 {
			s.e = fileio.BadInput(s.path, s.row, "embedding", "empty vector")
			return nil
		}
	}
	if len(s.out) != s.d {
		s.e = fileio.BadInput(s.path, s.row, "embedding", "%d values, earlier rows have %d", len(s.out), s.d)
		return nil
	}
	return s.out
}

func openVectors(path, column string) (vectorSource, error) {
	if strings.HasSuffix(strings.ToLower(path), ".npy") {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, unwrapPath(err))
		}
		r, err := faiss.NewNPYReader(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if err := checkNPYSize(path, f, r); err != nil {
			f.Close()
			return nil, err
		}
		return &npySource{path: path, f: f, r: r}, nil
	}
	if strings.HasSuffix(strings.ToLower(path), ".parquet") {
		if column == "" {
			column = "embedding"
		}
		return openParquetVectors(path, column)
	}
	return nil, fmt.Errorf("%s: embeddings must be .npy (float32 [N, d]) or .parquet (list<float>)", path)
}

func buildDense(opts BuildOptions, dir string, docs int64) (*DenseManifest, error) {
	factory := opts.Faiss
	if factory == "" {
		factory = "Flat"
	}
	src, err := openVectors(opts.Embeddings, opts.EmbeddingsColumn)
	if err != nil {
		return nil, err
	}
	defer src.close()
	if n := src.rows(); n >= 0 && n != docs {
		return nil, fmt.Errorf("%s: %d embeddings for %d passages", opts.Embeddings, n, docs)
	}
	first := src.next()
	if first == nil {
		if src.err() != nil {
			return nil, src.err()
		}
		return nil, fmt.Errorf("%s: no embeddings", opts.Embeddings)
	}
	d := src.dim()
	ix, err := faiss.New(d, factory, faiss.InnerProduct)
	if err != nil {
		return nil, fmt.Errorf("--faiss %q: %w", factory, err)
	}
	defer ix.Close()
	const chunkRows = 8192
	chunk := make([]float32, 0, chunkRows*d)
	chunk = append(chunk, first...)
	var added int64
	var pending [][]float32 // rows read for training, added after it
	trainSize := opts.TrainSize
	if trainSize <= 0 {
		trainSize = 262144
	}
	if !ix.IsTrained() {
		train := append([]float32(nil), first...)
		for int64(len(train)/d) < min(int64(trainSize), docs) {
			v := src.next()
			if v == nil {
				break
			}
			train = append(train, v...)
		}
		if src.err() != nil {
			return nil, src.err()
		}
		if err := ix.Train(train); err != nil {
			return nil, fmt.Errorf("--faiss %q: training on %d vectors: %w", factory, len(train)/d, err)
		}
		pending = [][]float32{train}
		chunk = chunk[:0]
	}
	for _, p := range pending {
		if err := ix.Add(p); err != nil {
			return nil, err
		}
		added += int64(len(p) / d)
	}
	for {
		v := src.next()
		if v != nil {
			chunk = append(chunk, v...)
		}
		if len(chunk) >= chunkRows*d || (v == nil && len(chunk) > 0) {
			if err := ix.Add(chunk); err != nil {
				return nil, err
			}
			added += int64(len(chunk) / d)
			chunk = chunk[:0]
			opts.Progress.Printf("dense: %d vectors", added)
		}
		if v == nil {
			break
		}
	}
	if src.err() != nil {
		return nil, src.err()
	}
	if added != docs {
		return nil, fmt.Errorf("%s: %d embeddings for %d passages", opts.Embeddings, added, docs)
	}
	if err := ix.Write(filepath.Join(dir, denseFile)); err != nil {
		return nil, err
	}
	return &DenseManifest{File: denseFile, Factory: factory, Source: "built from " + opts.Embeddings,
		Dim: d, Ntotal: ix.Ntotal(), Metric: ix.Metric().String()}, nil
}

func adoptDense(path, dir string, docs int64) (*DenseManifest, error) {
	dst := filepath.Join(dir, denseFile)
	if err := os.Link(path, dst); err != nil {
		if err := copyFile(path, dst); err != nil {
			return nil, err
		}
	}
	ix, err := faiss.Read(dst)
	if err != nil {
		return nil, fmt.Errorf("--faiss-read %s: %w", path, err)
	}
	defer ix.Close()
	if ix.Ntotal() != docs {
		return nil, fmt.Errorf("--faiss-read %s: %d vectors for %d passages", path, ix.Ntotal(), docs)
	}
	if ix.Metric() != faiss.InnerProduct {
		return nil, fmt.Errorf("--faiss-read %s: metric %v, want inner product", path, ix.Metric())
	}
	return &DenseManifest{File: denseFile, Source: "adopted " + path, Dim: ix.D(), Ntotal: ix.Ntotal(), Metric: ix.Metric().String()}, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("%s: %w", src, unwrapPath(err))
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// checkNPYSize compares a .npy file's size with the shape its header
// declares, so a truncated (or padded) file is refused before any row is
// used.
func checkNPYSize(path string, f *os.File, r *faiss.NPYReader) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", path, unwrapPath(err))
	}
	want := r.DataOffset + 4*r.Rows*int64(r.Dim)
	if st.Size() != want {
		whole := (st.Size() - r.DataOffset) / (4 * int64(r.Dim))
		return fmt.Errorf("%s: %d bytes, its header's shape (%d, %d) needs %d (truncated? %d whole rows present)", path, st.Size(), r.Rows, r.Dim, want, max(whole, 0))
	}
	return nil
}
