package envconfig

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every MEMPO_* name that the repository's Go files (tests included) and
// scripts mention is in the list, so `mempo-* env` shows all that a run or a
// test may read; and no Go file outside this package reads one by a literal
// name.
func TestEveryVariableIsListed(t *testing.T) {
	listed := map[string]bool{}
	for _, v := range All() {
		if listed[v.Name] {
			t.Errorf("%s listed twice", v.Name)
		}
		if v.Usage == "" {
			t.Errorf("%s has no usage", v.Name)
		}
		listed[v.Name] = true
	}
	name := regexp.MustCompile(`MEMPO_[A-Z0-9_]+`)
	literal := regexp.MustCompile(`(Getenv|LookupEnv)\("MEMPO_[A-Z0-9_]*"`)
	seen := 0
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "../.." || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		ext := filepath.Ext(path)
		if d.IsDir() || ext != ".go" && ext != ".sh" && ext != ".py" && d.Name() != "Makefile" {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if ext == ".go" && filepath.Base(filepath.Dir(path)) != "envconfig" {
			for _, m := range literal.FindAllString(string(src), -1) {
				t.Errorf("%s: %s…: read it through its envconfig.Var", path, m)
			}
		}
		for _, n := range name.FindAllString(string(src), -1) {
			if strings.HasSuffix(n, "_") {
				continue // a family of names in prose (MEMPO_BENCH_*)
			}
			seen++
			if !listed[n] {
				t.Errorf("%s: %s is mentioned but not in envconfig's list", path, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < len(listed) {
		t.Errorf("found %d mentions of MEMPO_ names, fewer than the %d listed: is the walk rooted at the repository?", seen, len(listed))
	}
}

func TestTable(t *testing.T) {
	t.Setenv("MEMPO_CUDA_DEVICE", "1")
	tab := Table()
	if !strings.Contains(tab, "MEMPO_CUDA_DEVICE      \"1\"\n") || !strings.Contains(tab, "MEMPO_CUDA_DEBUG       (unset)\n") {
		t.Errorf("table:\n%s", tab)
	}
}
