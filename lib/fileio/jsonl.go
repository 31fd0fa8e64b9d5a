package fileio

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// maxJSONLLine bounds one JSONL line (a rollout row with long contexts can be
// several megabytes).
const maxJSONLLine = 256 << 20

// EachJSONL calls fn for every non-empty line of r with its 1-based line
// number. An error from fn that is not already an *InputError is wrapped with
// the file name and line.
func EachJSONL(r io.Reader, file string, fn func(line int, raw []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxJSONLLine)
	n := 0
	for sc.Scan() {
		n++
		raw := sc.Bytes()
		if len(raw) == 0 {
			continue
		}
		if err := fn(n, raw); err != nil {
			if _, ok := err.(*InputError); ok {
				return err
			}
			return &InputError{File: file, Row: n, Err: err}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: line %d: %w", file, n+1, err)
	}
	return nil
}

// JSONLWriter writes one JSON object per line.
type JSONLWriter struct {
	w   *bufio.Writer
	enc *json.Encoder
}

// NewJSONLWriter wraps w; call Flush when done.
func NewJSONLWriter(w io.Writer) *JSONLWriter {
	bw := bufio.NewWriterSize(w, 1<<20)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &JSONLWriter{w: bw, enc: enc}
}

// Write encodes v followed by a newline.
func (j *JSONLWriter) Write(v any) error { return j.enc.Encode(v) }

// Flush writes buffered lines through.
func (j *JSONLWriter) Flush() error { return j.w.Flush() }
