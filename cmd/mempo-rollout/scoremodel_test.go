package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sameTokenizer: a scorer directory must hold the policy's tokenizer.json
// byte for byte, whether the policy's is named as a file or by its directory.
func TestSameTokenizer(t *testing.T) {
	dir := t.TempDir()
	pol, same, other := filepath.Join(dir, "policy"), filepath.Join(dir, "same"), filepath.Join(dir, "other")
	for d, body := range map[string]string{pol: `{"v": 1}`, same: `{"v": 1}`, other: `{"v": 2}`} {
		os.MkdirAll(d, 0o755)
		if err := os.WriteFile(filepath.Join(d, "tokenizer.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tokPath := range []string{pol, filepath.Join(pol, "tokenizer.json")} {
		if err := sameTokenizer(tokPath, same); err != nil {
			t.Errorf("%s against %s: %v", tokPath, same, err)
		}
		if err := sameTokenizer(tokPath, other); err == nil || !strings.Contains(err.Error(), "another tokenizer.json") {
			t.Errorf("%s against %s: %v, want a mismatch", tokPath, other, err)
		}
	}
	if err := sameTokenizer(pol, filepath.Join(dir, "missing")); err == nil {
		t.Error("a scorer directory without tokenizer.json was accepted")
	}
}
