package retrieval

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/mempo/mempo/lib/cli"
)

// corpusRows counts the passages of a corpus file for progress totals: a
// Parquet file's row count from its footer, or the non-empty lines of a
// plain JSONL file (one pass at disk speed, small beside indexing it). ok is
// false for stdin and compressed input, where the size is not known ahead.
func corpusRows(path string) (n int64, ok bool) {
	if path == "-" || path == "" {
		return 0, false
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return 0, false
	}
	lower := strings.ToLower(path)
	if strings.HasSuffix(lower, ".parquet") {
		pf, err := parquet.OpenFile(f, st.Size())
		if err != nil {
			return 0, false
		}
		return pf.NumRows(), true
	}
	if !strings.HasSuffix(lower, ".jsonl") && !strings.HasSuffix(lower, ".ndjson") && !strings.HasSuffix(lower, ".json") {
		return 0, false
	}
	buf := make([]byte, 1<<20)
	prev := byte('\n')
	for {
		k, err := f.Read(buf)
		for _, c := range buf[:k] {
			if c == '\n' && prev != '\n' {
				n++
			}
			prev = c
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, false
		}
	}
	if prev != '\n' {
		n++
	}
	return n, true
}

// countLine is the progress text of a stage over a corpus: "N passages" or,
// with a known total, "N/T passages (P%), ETA".
func countLine(verb string, done, total int64, known bool, since time.Time) string {
	if !known || total <= 0 {
		return fmt.Sprintf("%s: %d passages", verb, done)
	}
	frac := float64(done) / float64(total)
	line := fmt.Sprintf("%s: %d/%d passages (%.0f%%)", verb, done, total, 100*frac)
	if eta := cli.ETA(time.Since(since), frac); eta != "" && frac < 1 {
		line += ", " + eta
	}
	return line
}
