package fileio

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckOutputs(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	os.WriteFile(in, []byte("x"), 0o644)
	os.Symlink(in, filepath.Join(dir, "link.parquet"))
	os.Link(in, filepath.Join(dir, "hard.parquet"))
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	os.Chdir(dir)
	inputs := []Named{{Flag: "rollouts", Path: "in.parquet"}, {Flag: "model", Path: "-"}}
	for _, c := range []struct {
		out  string
		want string
	}{
		{"in.parquet", "is also the input --rollouts"},
		{"./sub/../in.parquet", "is also the input"},
		{filepath.Join(dir, "link.parquet"), "is also the input"},
		{"hard.parquet", "is also the input"},
		{".", "would replace the directory that holds the input"},
		{dir, "would replace the directory"},
		{"out.parquet", ""},
		{"sub/in.parquet", ""},
		{"-", ""},
	} {
		if err := CheckOutputs(inputs, []Named{{"report", ".", false}}); err != nil {
			t.Errorf("--report . (files written into it): %v", err)
		}
		err := CheckOutputs(inputs, []Named{{"out", c.out, true}})
		if c.want == "" {
			if err != nil {
				t.Errorf("--out %s: %v", c.out, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--out %s: %v, want %q", c.out, err, c.want)
		}
	}
}

func TestCheckOutputsDistinct(t *testing.T) {
	dir := t.TempDir()
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	os.Chdir(dir)
	err := CheckOutputs(nil, []Named{{"out", "o.parquet", true}, {"answer-rows", "./x/../o.parquet", false}})
	if err == nil || !strings.Contains(err.Error(), "--answer-rows ./x/../o.parquet is also the output --out o.parquet") {
		t.Errorf("one path for two outputs: %v", err)
	}
	if err := CheckOutputs(nil, []Named{{"out", "o.parquet", true}, {"answer-rows", "rows.jsonl", false}, {"metrics", "-", false}, {"tb", "-", false}}); err != nil {
		t.Errorf("distinct outputs: %v", err)
	}
}
