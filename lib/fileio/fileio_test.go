package fileio

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	for path, want := range map[string]string{"-": "jsonl", "a.jsonl": "jsonl", "b.PARQUET": "parquet", "c.json": "jsonl"} {
		got, err := Format(path)
		if err != nil || got != want {
			t.Errorf("Format(%q) = %q, %v; want %q", path, got, err, want)
		}
	}
	if _, err := Format("x.csv"); err == nil || !strings.Contains(err.Error(), "x.csv") {
		t.Errorf("Format(x.csv) error = %v, want one naming the file", err)
	}
}

func TestAtomicFileKeepsOldUntilCommit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.jsonl")
	os.WriteFile(path, []byte("old\n"), 0o644)
	out, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	out.Write([]byte("new\n"))
	if b, _ := os.ReadFile(path); string(b) != "old\n" {
		t.Fatalf("target changed before Commit: %q", b)
	}
	out.Abort()
	if b, _ := os.ReadFile(path); string(b) != "old\n" {
		t.Fatalf("Abort damaged the target: %q", b)
	}
	out, _ = Create(path)
	out.Write([]byte("new\n"))
	if err := out.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new\n" {
		t.Fatalf("after Commit: %q", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestReplaceDir(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "index")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "v"), []byte("1"), 0o644)
	built, err := TempDirBeside(dir)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(built, "v"), []byte("2"), 0o644)
	if err := ReplaceDir(built, dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "v")); string(b) != "2" {
		t.Fatalf("got %q", b)
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) != 1 {
		t.Fatalf("leftovers: %v", entries)
	}
}

func TestEachJSONLNamesLine(t *testing.T) {
	err := EachJSONL(strings.NewReader("{}\n\n{bad\n"), "f.jsonl", func(line int, raw []byte) error {
		if raw[1] == 'b' {
			return errors.New("bad json")
		}
		return nil
	})
	if err == nil || err.Error() != "f.jsonl: row 3: bad json" {
		t.Fatalf("err = %v", err)
	}
}
