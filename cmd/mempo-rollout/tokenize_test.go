package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/cli"
)

func runTokenizeCmd(args ...string) error {
	app := cli.App("mempo-rollout", "test", "mempo-rollout tokenize")
	app.Commands = []*ucli.Command{tokenizeCommand}
	return app.Run(append([]string{"mempo-rollout", "tokenize"}, args...))
}

func tokReadLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v in %q", path, err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

func tokInts(v any) []int {
	var out []int
	for _, x := range v.([]any) {
		out = append(out, int(x.(float64)))
	}
	return out
}

// qwenTokenizerPath finds the real Qwen3 tokenizer or skips.
func qwenTokenizerPath(t *testing.T) string {
	for _, p := range []string{os.Getenv("QWEN_TOKENIZER"), "../../testdata/qwen3/tokenizer.json"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	t.Skip("testdata/qwen3/tokenizer.json is absent: run make fixtures-tokenizer")
	return ""
}

func TestTokenizeGoldenFileToFile(t *testing.T) {
	tokPath := qwenTokenizerPath(t)
	dir := t.TempDir()
	// The golden rows with extra fields ("decoded", "ids" moved first for
	// some) that must survive unchanged and in place.
	golden, err := os.ReadFile("../../testdata/tokenizer/qwen3-golden.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(golden)), "\n")[:300]
	var in strings.Builder
	var want [][]int
	for i, l := range lines {
		var g struct {
			Text string `json:"text"`
			IDs  []int  `json:"ids"`
		}
		json.Unmarshal([]byte(l), &g)
		want = append(want, g.IDs)
		text, _ := json.Marshal(g.Text)
		if i%2 == 0 {
			in.WriteString(`{"n": ` + string(rune('0'+i%10)) + `, "text": ` + string(text) + `, "meta": {"k": [1, 2]}}` + "\n")
		} else {
			in.WriteString(`{"ids": [1], "text": ` + string(text) + "}\n")
		}
	}
	inPath, outPath := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	os.WriteFile(inPath, []byte(in.String()), 0o644)
	if err := runTokenizeCmd("--tokenizer", filepath.Dir(tokPath), "--in", inPath, "--out", outPath); err != nil {
		t.Fatal(err)
	}
	rows := tokReadLines(t, outPath)
	if len(rows) != len(lines) {
		t.Fatalf("%d rows out, %d in", len(rows), len(lines))
	}
	raw, _ := os.ReadFile(outPath)
	outLines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	for i, r := range rows {
		if got := tokInts(r["ids"]); !slices.Equal(got, want[i]) {
			t.Fatalf("row %d: ids %v, want HF's %v", i+1, got, want[i])
		}
		if i%2 == 0 {
			if !strings.HasPrefix(outLines[i], `{"n":`) || !strings.Contains(outLines[i], `"meta":{"k":[1,2]}`) {
				t.Fatalf("row %d: other fields not kept in place: %s", i+1, outLines[i])
			}
		} else if !strings.HasPrefix(outLines[i], `{"ids":[`) {
			t.Fatalf("row %d: existing ids field not replaced in place: %.60s", i+1, outLines[i])
		}
	}

	// --decode turns the ids back into text: NFC of the input, here equal
	// to HF's decode.
	back := filepath.Join(dir, "back.jsonl")
	if err := runTokenizeCmd("--tokenizer", tokPath, "--decode", "--in", outPath, "--out", back); err != nil {
		t.Fatal(err)
	}
	for i, r := range tokReadLines(t, back) {
		var g struct {
			Decoded string `json:"decoded"`
		}
		json.Unmarshal([]byte(lines[i]), &g)
		if r["text"] != g.Decoded {
			t.Fatalf("row %d: decoded %q, want %q", i+1, r["text"], g.Decoded)
		}
	}
}

func TestTokenizeSpecialTokensAndNoHTMLEscape(t *testing.T) {
	dir := t.TempDir()
	tokPath := "../../testdata/tokenizer/small-bpe.json"
	inPath, outPath := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	os.WriteFile(inPath, []byte(`{"text": "<|im_start|>user\nhi & bye<|im_end|>"}`+"\n\n"), 0o644)
	if err := runTokenizeCmd("--tokenizer", tokPath, "--in", inPath, "--out", outPath); err != nil {
		t.Fatal(err)
	}
	rows := tokReadLines(t, outPath)
	ids := tokInts(rows[0]["ids"])
	if ids[0] != 1 || ids[len(ids)-1] != 2 { // <|im_start|> = 1, <|im_end|> = 2 in small-bpe.json
		t.Fatalf("special tokens not matched: %v", ids)
	}
	back := filepath.Join(dir, "back.jsonl")
	if err := runTokenizeCmd("--tokenizer", tokPath, "--decode", "--in", outPath, "--out", back); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(back)
	if !strings.Contains(string(raw), `"text":"<|im_start|>user\nhi & bye<|im_end|>"`) {
		t.Fatalf("decoded line: %s", raw)
	}
}

func TestTokenizeBadInput(t *testing.T) {
	dir := t.TempDir()
	tokPath := "../../testdata/tokenizer/small-bpe.json"
	cases := []struct {
		name, input string
		decode      bool
		want        string
	}{
		{"bad json", "{\"text\": \"a\"}\n{\"text\": \n", false, `in.jsonl: row 2: not a JSON object`},
		{"not an object", "[1, 2]\n", false, `row 1: not a JSON object`},
		{"missing text", "{\"text\": \"a\"}\n{\"txt\": \"b\"}\n", false, `row 2: field "text": missing`},
		{"text not string", "{\"text\": 5}\n", false, `row 1: field "text": want a string`},
		{"missing ids", "{\"text\": \"a\"}\n", true, `row 1: field "ids": missing`},
		{"ids not ints", "{\"ids\": [1, \"x\"]}\n", true, `row 1: field "ids": want an array of integer`},
		{"id out of range", "{\"ids\": [1, 2]}\n{\"ids\": [3, 512]}\n", true, `row 2: field "ids": ids[1]: token id 512 is out of range [0, 512)`},
		{"negative id", "{\"ids\": [-1]}\n", true, `row 1: field "ids": ids[0]: token id -1 is out of range`},
	}
	for _, c := range cases {
		inPath, outPath := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
		os.WriteFile(inPath, []byte(c.input), 0o644)
		args := []string{"--tokenizer", tokPath, "--in", inPath, "--out", outPath}
		if c.decode {
			args = append(args, "--decode")
		}
		err := runTokenizeCmd(args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line: %q", c.name, err)
		}
		if _, err := os.Stat(outPath); err == nil {
			t.Errorf("%s: output written despite the error", c.name)
		}
	}
	// A bad tokenizer file is named.
	bad := filepath.Join(dir, "tokenizer.json")
	os.WriteFile(bad, []byte(`{"model": {"type": "Unigram", "vocab": {}}}`), 0o644)
	err := runTokenizeCmd("--tokenizer", dir, "--in", filepath.Join(dir, "in.jsonl"), "--out", filepath.Join(dir, "o.jsonl"))
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "Unigram") {
		t.Errorf("bad tokenizer: %v", err)
	}
}
