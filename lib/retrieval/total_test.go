package retrieval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCorpusRowsAndCountLine(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.jsonl")
	os.WriteFile(p, []byte("{\"id\":\"1\",\"contents\":\"a\"}\n\n{\"id\":\"2\",\"contents\":\"b\"}"), 0o644)
	if n, ok := corpusRows(p); !ok || n != 2 {
		t.Errorf("corpusRows = %d, %v; want 2 (blank line skipped, last line without newline counted)", n, ok)
	}
	if _, ok := corpusRows("-"); ok {
		t.Error("stdin has no known size")
	}
	if got := countLine("indexing", 7, 0, false, time.Now()); got != "indexing: 7 passages" {
		t.Errorf("unknown total: %q", got)
	}
	got := countLine("indexing", 25, 100, true, time.Now().Add(-10*time.Second))
	if !strings.HasPrefix(got, "indexing: 25/100 passages (25%), ETA 30s") {
		t.Errorf("known total: %q", got)
	}
}
