package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/testenv"
)

func runTokenizeCmd(args ...string) error {
	return testenv.RunApp("mempo-rollout", []*ucli.Command{tokenizeCommand}, append([]string{"tokenize"}, args...)...)
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
	rows := testenv.ReadJSONL(t, outPath)
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
	for i, r := range testenv.ReadJSONL(t, back) {
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
	rows := testenv.ReadJSONL(t, outPath)
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

// Bad input lines are the testdata/cases/tokenize-*.txtar cases (one line
// naming the row and field, no output written); a bad tokenizer file is
// named.
func TestTokenizeBadInput(t *testing.T) {
	dir := t.TempDir()
	// A bad tokenizer file is named.
	bad := filepath.Join(dir, "tokenizer.json")
	os.WriteFile(bad, []byte(`{"model": {"type": "Unigram", "vocab": {}}}`), 0o644)
	err := runTokenizeCmd("--tokenizer", dir, "--in", filepath.Join(dir, "in.jsonl"), "--out", filepath.Join(dir, "o.jsonl"))
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "Unigram") {
		t.Errorf("bad tokenizer: %v", err)
	}
}
