package records

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/mempo/mempo/lib/fileio"
)

// Row is any of the row types of this package.
type Row interface {
	Rollout | Update | Score
}

// validator is implemented by the pointer of every Row type.
type validator interface{ Validate() error }

// required lists the columns a Parquet file must have to be read as T; other
// columns may be missing (older files) and read as zero values.
func required[T Row]() []string {
	var z T
	switch any(z).(type) {
	case Rollout:
		return []string{"task_id", "k", "golds", "answer"}
	case Update:
		return []string{"step"}
	default:
		return []string{"run", "metric", "value"}
	}
}

// Writer writes rows of T atomically to a Parquet or JSONL file (by
// extension; "-" is JSONL on stdout). Nothing appears at the path until
// Commit.
type Writer[T Row] struct {
	path string
	out  *fileio.AtomicFile
	pw   *parquet.GenericWriter[T]
	jw   *fileio.JSONLWriter
	n    int
}

// Create starts a Writer at path.
func Create[T Row](path string) (*Writer[T], error) {
	format, err := fileio.Format(path)
	if err != nil {
		return nil, err
	}
	out, err := fileio.Create(path)
	if err != nil {
		return nil, err
	}
	w := &Writer[T]{path: path, out: out}
	if format == "parquet" {
		w.pw = parquet.NewGenericWriter[T](out, parquet.Compression(&parquet.Zstd))
	} else {
		w.jw = fileio.NewJSONLWriter(out)
	}
	return w, nil
}

// Write validates and appends rows. JSON cannot hold NaN or infinities, so a
// JSONL writer refuses them with the field that holds one.
func (w *Writer[T]) Write(rows ...T) error {
	for i := range rows {
		w.n++
		if err := any(&rows[i]).(validator).Validate(); err != nil {
			return rowError(w.path, w.n, err)
		}
		if w.jw != nil {
			if err := w.jw.Write(&rows[i]); err != nil {
				return fileio.BadInput(w.path, w.n, "", "%v", err)
			}
		}
	}
	if w.pw != nil {
		if _, err := w.pw.Write(rows); err != nil {
			return fmt.Errorf("%s: %w", w.path, err)
		}
	}
	return nil
}

// Commit finishes the file and moves it into place.
func (w *Writer[T]) Commit() error {
	if w.pw != nil {
		if err := w.pw.Close(); err != nil {
			w.out.Abort()
			return fmt.Errorf("%s: %w", w.path, err)
		}
	} else if err := w.jw.Flush(); err != nil {
		w.out.Abort()
		return fmt.Errorf("%s: %w", w.path, err)
	}
	return w.out.Commit()
}

// Abort discards everything written; safe after Commit.
func (w *Writer[T]) Abort() { w.out.Abort() }

// WriteFile writes rows to path atomically.
func WriteFile[T Row](path string, rows []T) error {
	w, err := Create[T](path)
	if err != nil {
		return err
	}
	defer w.Abort()
	if err := w.Write(rows...); err != nil {
		return err
	}
	return w.Commit()
}

func rowError(file string, row int, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fileio.BadInput(file, row, fe.Field, "%s", fe.Msg)
	}
	return fileio.BadInput(file, row, "", "%v", err)
}

// Each reads the rows of a Parquet or JSONL file ("-" is JSONL on stdin) in
// order, validates each and calls fn with its 1-based row number (for JSONL,
// the line number). A row that does not decode or validate stops the read with
// an error naming the file, row and field.
func Each[T Row](path string, fn func(row int, v *T) error) error {
	format, err := fileio.Format(path)
	if err != nil {
		return err
	}
	if format == "parquet" {
		return eachParquet(path, fn)
	}
	r, err := fileio.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	return fileio.EachJSONL(r, path, func(line int, raw []byte) error {
		var v T
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return jsonError(path, line, err)
		}
		if dec.More() {
			return fileio.BadInput(path, line, "", "more than one JSON value on the line")
		}
		if err := any(&v).(validator).Validate(); err != nil {
			return rowError(path, line, err)
		}
		return fn(line, &v)
	})
}

func jsonError(path string, line int, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fileio.BadInput(path, line, te.Field, "cannot hold JSON %s", te.Value)
	}
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		field := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
		return fileio.BadInput(path, line, field, "is not a column of this file type (see docs/formats.md)")
	}
	return fileio.BadInput(path, line, "", "not valid JSON: %v", err)
}

func eachParquet[T Row](path string, fn func(row int, v *T) error) (err error) {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, errors.Unwrap(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return fmt.Errorf("%s: not a Parquet file: %w", path, err)
	}
	have := map[string]bool{}
	for _, fld := range pf.Schema().Fields() {
		have[fld.Name()] = true
	}
	for _, c := range required[T]() {
		if !have[c] {
			return fileio.BadInput(path, 0, c, "required column is missing")
		}
	}
	row := 0
	defer func() {
		// parquet-go panics on some schema mismatches; report them as input errors.
		if p := recover(); p != nil {
			err = fileio.BadInput(path, row+1, "", "cannot read row: %v", p)
		}
	}()
	rd := parquet.NewGenericReader[T](pf)
	defer rd.Close()
	buf := make([]T, 64)
	for {
		n, rerr := rd.Read(buf)
		for i := 0; i < n; i++ {
			row++
			if err := any(&buf[i]).(validator).Validate(); err != nil {
				return rowError(path, row, err)
			}
			if err := fn(row, &buf[i]); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return fileio.BadInput(path, row+1, "", "cannot read row: %v", rerr)
		}
		clear(buf)
	}
}

// ReadFile reads every row of a file.
func ReadFile[T Row](path string) ([]T, error) {
	var rows []T
	err := Each(path, func(_ int, v *T) error {
		rows = append(rows, *v)
		return nil
	})
	return rows, err
}
