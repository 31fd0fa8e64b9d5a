// Package fileio holds the file conventions every mempo stage shares: "-" for
// stdin/stdout, formats chosen by file extension, JSONL reading and writing,
// outputs written atomically (a reader never sees a half-written file), and
// input errors that name the file, row and field.
package fileio

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Format returns "jsonl" or "parquet" for a path, chosen by its extension;
// "-" (stdin/stdout) is JSONL. Anything else is an error naming the path.
func Format(path string) (string, error) {
	if path == "-" {
		return "jsonl", nil
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".ndjson", ".json":
		return "jsonl", nil
	case ".parquet":
		return "parquet", nil
	}
	return "", fmt.Errorf("%s: unknown file format (want .jsonl or .parquet)", path)
}

// Open opens path for reading; "-" is stdin (closing it is a no-op).
func Open(path string) (io.ReadCloser, error) {
	if path == "-" {
		return io.NopCloser(os.Stdin), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, unwrapPathError(err))
	}
	return f, nil
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// InputError names the file, the row (1-based; 0 when unknown) and the field
// that made an input unusable.
type InputError struct {
	File  string
	Row   int
	Field string
	Err   error
}

func (e *InputError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Row > 0 {
		fmt.Fprintf(&b, ": row %d", e.Row)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %q", e.Field)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *InputError) Unwrap() error { return e.Err }

// BadInput builds an InputError with a formatted message.
func BadInput(file string, row int, field, format string, args ...any) error {
	return &InputError{File: file, Row: row, Field: field, Err: fmt.Errorf(format, args...)}
}
