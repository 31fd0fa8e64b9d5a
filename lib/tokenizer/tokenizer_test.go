package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// repoRoot is the repository root, two levels above this package: go test
// runs in the package directory (and so must a test binary copied elsewhere).
func repoRoot() string { return filepath.Join("..", "..") }

func testdata(name string) string { return filepath.Join(repoRoot(), "testdata", "tokenizer", name) }

// qwenPath finds the real Qwen3 tokenizer.json or skips the test.
func qwenPath(t testing.TB) string {
	t.Helper()
	for _, p := range []string{os.Getenv("QWEN_TOKENIZER"), filepath.Join(repoRoot(), "testdata", "qwen3", "tokenizer.json")} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("testdata/qwen3/tokenizer.json is absent: run make fixtures-tokenizer")
	return ""
}

var (
	qwenOnce sync.Once
	qwenTok  [2]*Tokenizer
	qwenErr  error
)

// qwen loads the Qwen3 tokenizer once; the regexp2 variant shares its
// model and differs only in the pre-tokenizer's matcher (parsing the 11 MB
// file twice would double the test time).
func qwen(t testing.TB, impl Impl) *Tokenizer {
	t.Helper()
	path := qwenPath(t)
	qwenOnce.Do(func() {
		var hand *Tokenizer
		if hand, qwenErr = Load(path); qwenErr != nil {
			return
		}
		qwenTok[ImplHand] = hand
		qwenTok[ImplRegexp2], qwenErr = withRegexp2(hand)
	})
	if qwenErr != nil {
		t.Fatal(qwenErr)
	}
	return qwenTok[impl]
}

// withRegexp2 returns a tokenizer like t whose hand-written matchers are
// replaced by regexp2 compilations of the same patterns.
func withRegexp2(t *Tokenizer) (*Tokenizer, error) {
	c := &Tokenizer{
		model: t.model, normalizer: t.normalizer, byteLevelDecoder: t.byteLevelDecoder,
		pre: pipeline{byteLevel: t.pre.byteLevel},
	}
	for _, st := range t.pre.steps {
		if st.split != nil {
			cp := *st.split
			var pat string
			switch st.split.m.(type) {
			case qwenMatcher:
				pat = qwenPattern
			case gpt2Matcher:
				pat = gpt2Pattern
			}
			if pat != "" {
				m, err := newRegexMatcher(pat, ImplRegexp2)
				if err != nil {
					return nil, err
				}
				cp.m = m
			}
			st.split = &cp
		}
		c.pre.steps = append(c.pre.steps, st)
	}
	if err := c.setup(t.added); err != nil {
		return nil, err
	}
	return c, nil
}

type golden struct {
	Text    string `json:"text"`
	IDs     []int  `json:"ids"`
	Decoded string `json:"decoded"`
}

func readJSONL[T any](t testing.TB, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestQwenGolden(t *testing.T) {
	rows := readJSONL[golden](t, testdata("qwen3-golden.jsonl"))
	if len(rows) < 2000 {
		t.Fatalf("only %d golden rows", len(rows))
	}
	for _, impl := range []Impl{ImplHand, ImplRegexp2} {
		t.Run(impl.String(), func(t *testing.T) {
			tok := qwen(t, impl)
			bad := 0
			for i, r := range rows {
				got := tok.Encode(r.Text)
				if !slices.Equal(got, r.IDs) {
					if bad++; bad <= 5 {
						t.Errorf("row %d %q:\n got %v\nwant %v", i+1, trunc(r.Text), got, r.IDs)
					}
				}
				if n := tok.Count(r.Text); n != len(r.IDs) {
					t.Errorf("row %d: Count = %d, want %d", i+1, n, len(r.IDs))
				}
			}
			if bad > 0 {
				t.Fatalf("%d of %d golden strings differ", bad, len(rows))
			}
		})
	}
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func TestQwenDecode(t *testing.T) {
	tok := qwen(t, ImplHand)
	rows := readJSONL[golden](t, testdata("qwen3-golden.jsonl"))
	for i, r := range rows {
		got, err := tok.Decode(r.IDs)
		if err != nil {
			t.Fatalf("row %d: %v", i+1, err)
		}
		if got != r.Decoded {
			t.Errorf("row %d: Decode = %q, want HF's %q", i+1, trunc(got), trunc(r.Decoded))
		}
		// The Qwen normalizer is NFC and byte-level BPE is lossless.
		if want := norm.NFC.String(r.Text); got != want {
			t.Errorf("row %d: decode(encode(x)) = %q, want NFC(x) = %q", i+1, trunc(got), trunc(want))
		}
		// Streaming decode gives the same text.
		d := tok.NewDecoder()
		var b strings.Builder
		for _, id := range r.IDs {
			s, err := d.Add(id)
			if err != nil {
				t.Fatal(err)
			}
			if !utf8Valid(s) {
				t.Fatalf("row %d: streaming decoder emitted invalid UTF-8 %q", i+1, s)
			}
			b.WriteString(s)
		}
		b.WriteString(d.Flush())
		if b.String() != r.Decoded {
			t.Errorf("row %d: streamed %q, want %q", i+1, trunc(b.String()), trunc(r.Decoded))
		}
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\x00INVALID") == s }

func TestQwenVocabulary(t *testing.T) {
	tok := qwen(t, ImplHand)
	for name, want := range map[string]int{"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645} {
		id, err := tok.SpecialID(name)
		if err != nil || id != want {
			t.Errorf("SpecialID(%q) = %d, %v; want %d", name, id, err, want)
		}
		if !tok.IsSpecial(want) {
			t.Errorf("IsSpecial(%d) = false", want)
		}
		if s, ok := tok.Token(want); !ok || s != name {
			t.Errorf("Token(%d) = %q, %v", want, s, ok)
		}
	}
	if _, err := tok.SpecialID("<think>"); err == nil || !strings.Contains(err.Error(), "not a special") {
		t.Errorf("SpecialID(<think>) error = %v, want one saying it is not special", err)
	}
	if _, err := tok.SpecialID("<nope>"); err == nil {
		t.Error("SpecialID of a missing token gave no error")
	}
	// 151643 model tokens plus added tokens up to </think> (151668).
	if tok.VocabSize() != 151669 {
		t.Errorf("VocabSize = %d, want 151669", tok.VocabSize())
	}
	if id, ok := tok.TokenID("Ġthe"); !ok || id != 279 {
		t.Errorf("TokenID(Ġthe) = %d, %v; want 279", id, ok)
	}
	if id, ok := tok.TokenID("<think>"); !ok || id != 151667 {
		t.Errorf("TokenID(<think>) = %d, %v", id, ok)
	}
	// 'Ġ' is the space byte; a CJK character is three byte tokens or fewer.
	if b, err := tok.TokenBytes(279); err != nil || string(b) != " the" {
		t.Errorf("TokenBytes(279) = %q, %v", b, err)
	}
	if _, err := tok.TokenBytes(tok.VocabSize()); err == nil {
		t.Error("TokenBytes out of range gave no error")
	}
	if _, err := tok.Decode([]int{1, -3}); err == nil || !strings.Contains(err.Error(), "ids[1]") {
		t.Errorf("Decode with a bad id: %v", err)
	}
	if s, _ := tok.DecodeSkipSpecial(tok.Encode("<|im_start|>user\nhi<|im_end|>")); s != "user\nhi" {
		t.Errorf("DecodeSkipSpecial = %q", s)
	}
	if len(tok.AddedTokens()) != 26 {
		t.Errorf("AddedTokens: %d, want 26", len(tok.AddedTokens()))
	}
}

func TestStreamingDecoderHoldsPartialUTF8(t *testing.T) {
	tok := qwen(t, ImplHand)
	// A character split over byte tokens: ids of its single bytes.
	ids := []int{}
	for _, b := range []byte("👋") {
		id, ok := tok.TokenID(string(byteChar[b]))
		if !ok {
			t.Fatal("byte token missing")
		}
		ids = append(ids, id)
	}
	d := tok.NewDecoder()
	for i, id := range ids[:3] {
		if s, _ := d.Add(id); s != "" {
			t.Fatalf("byte %d: emitted %q before the character was complete", i, s)
		}
	}
	if !d.Pending() {
		t.Fatal("Pending = false with 3 of 4 bytes")
	}
	if s, _ := d.Add(ids[3]); s != "👋" {
		t.Fatalf("got %q", s)
	}
	// An incomplete character at the end flushes as one U+FFFD, as HF's
	// from_utf8_lossy does; a bad byte in the middle is decided at once.
	d.Add(ids[0])
	d.Add(ids[1])
	if s := d.Flush(); s != "\uFFFD" {
		t.Fatalf("Flush = %q", s)
	}
	whole, _ := tok.Decode([]int{ids[0], ids[1], 64})
	if whole != "\uFFFDa" {
		t.Fatalf("Decode of a truncated character = %q, want U+FFFD then a", whole)
	}
	d.Add(ids[0])
	s, _ := d.Add(64) // 'a' ends the sequence early
	if s != "\uFFFDa" {
		t.Fatalf("streamed %q", s)
	}
}

func TestLossyUTF8MatchesRust(t *testing.T) {
	// Expected values are those of Rust's String::from_utf8_lossy.
	for in, want := range map[string]string{
		"a\xF0\x9F\x91b":   "a\uFFFDb",           // one maximal subpart
		"\xE0\x80":         "\uFFFD\uFFFD",       // E0 80 is never valid
		"\xED\xA0\x80":     "\uFFFD\uFFFD\uFFFD", // surrogate
		"\xF4\x90\x80\x80": "\uFFFD\uFFFD\uFFFD\uFFFD",
		"\xC3":             "\uFFFD",
		"\xFF\xFEok":       "\uFFFD\uFFFDok",
		"é中":               "é中",
	} {
		if got := lossyUTF8([]byte(in)); got != want {
			t.Errorf("lossyUTF8(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestChatGolden(t *testing.T) {
	tok := qwen(t, ImplHand)
	type chatRow struct {
		Messages            []Message `json:"messages"`
		AddGenerationPrompt bool      `json:"add_generation_prompt"`
		Prefill             string    `json:"prefill"`
		IDs                 []int     `json:"ids"`
	}
	rows := readJSONL[chatRow](t, testdata("chat-golden.jsonl"))
	c, err := tok.ChatML()
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		got := c.Render(r.Messages, r.AddGenerationPrompt, r.Prefill)
		if !slices.Equal(got, r.IDs) {
			t.Errorf("chat %d:\n got %v\nwant %v", i+1, got, r.IDs)
		}
	}
	// Generated ids are kept verbatim: a generated turn that a re-encode
	// would tokenize differently stays as generated.
	prompt := c.Render([]Message{{Role: "user", Content: "hi"}}, true, "<mem>")
	gen := []int{tok.Encode("h")[0], tok.Encode("i")[0]} // "hi" as two tokens
	ids := c.CloseTurn(c.AppendGenerated(slices.Clone(prompt), gen))
	want := append(append(slices.Clone(prompt), gen...), c.End, tok.Encode("\n")[0])
	if !slices.Equal(ids, want) {
		t.Fatalf("AppendGenerated+CloseTurn = %v, want %v", ids, want)
	}
	if got := c.CloseTurn(append(slices.Clone(prompt), c.End)); len(got) != len(prompt)+2 {
		t.Fatalf("CloseTurn doubled <|im_end|>: %v", got[len(prompt):])
	}
}

func TestWordLevelGolden(t *testing.T) {
	tok, err := Load(testdata("wordlevel.json"))
	if err != nil {
		t.Fatal(err)
	}
	rows := readJSONL[golden](t, testdata("wordlevel-golden.jsonl"))
	for i, r := range rows {
		if got := tok.Encode(r.Text); !slices.Equal(got, r.IDs) {
			t.Errorf("row %d %q: got %v want %v", i+1, r.Text, got, r.IDs)
		}
	}
	// Special tokens are matched before lowercasing and splitting, and a
	// WordLevel tokenizer without a decoder joins tokens with spaces.
	ids := tok.Encode("<|im_start|>The Cat")
	if id, _ := tok.SpecialID("<|im_start|>"); len(ids) != 3 || ids[0] != id {
		t.Fatalf("ids %v", ids)
	}
	if s, _ := tok.Decode(ids); !strings.HasPrefix(s, "<|im_start|> ") {
		t.Fatalf("Decode = %q", s)
	}
	if got := (lowercase{}).normalize("İSTANBUL ΣΑΣ"); got != "i\u0307stanbul σασ" {
		t.Fatalf("lowercase = %q", got)
	}
}

func TestSmallBPEGolden(t *testing.T) {
	for _, impl := range []Impl{ImplHand, ImplRegexp2} {
		tok, err := LoadWith(testdata("small-bpe.json"), Options{Impl: impl})
		if err != nil {
			t.Fatal(err)
		}
		rows := readJSONL[golden](t, testdata("small-bpe-golden.jsonl"))
		bad := 0
		for i, r := range rows {
			if got := tok.Encode(r.Text); !slices.Equal(got, r.IDs) {
				if bad++; bad <= 5 {
					t.Errorf("%s row %d %q: got %v want %v", impl, i+1, trunc(r.Text), got, r.IDs)
				}
			}
			// No normalizer: decoding gives the text back byte for byte.
			if s, _ := tok.Decode(r.IDs); s != r.Text {
				t.Errorf("row %d: decode = %q", i+1, trunc(s))
			}
		}
	}
}

// TestMergeLoops checks that the scan and heap merge loops agree, and that
// both work without the cache, on every golden string.
func TestMergeLoops(t *testing.T) {
	tok := qwen(t, ImplHand)
	m := tok.model.(*bpeModel)
	defer func(th int) { m.heapThreshold, m.disableCacheForTest = th, false }(m.heapThreshold)
	m.disableCacheForTest = true
	rows := readJSONL[golden](t, testdata("qwen3-golden.jsonl"))
	for _, th := range []int{1, 1 << 30} {
		m.heapThreshold = th
		for i, r := range rows {
			if got := tok.Encode(r.Text); !slices.Equal(got, r.IDs) {
				t.Fatalf("heapThreshold %d row %d: got %v want %v", th, i+1, got, r.IDs)
			}
		}
	}
}

func TestSplittersAgree(t *testing.T) {
	for _, s := range splitterSeeds {
		checkSplitters(t, s)
	}
}

var splitterSeeds = []string{
	"", "a", " ", "  a", "a  \n\n b", "\t\tx", " \r\n\r\n  ", "it's I'M we'LL 'ſ x'ſt 'Re", "1234 56",
	" ?!x", "  !!\n\nfoo", "中文 テスト", "\u00a0\u3000x", "x \u2028y", "e\u0301", "'", "''s", " 'd", "\r", "a\n",
	"<|im_end|>", "a 1 b2 c-3 ...", "\x00\x01 \x7f", "😀 😀", "  \n  \n", "x\n\n", " ", "word \t\n",
}

// splitterPairs holds the hand-written and regexp2 matchers of both
// patterns, compiled once.
var splitterPairs = sync.OnceValue(func() [][2]matcher {
	var out [][2]matcher
	for _, pat := range []string{qwenPattern, gpt2Pattern} {
		hand, _ := newRegexMatcher(pat, ImplHand)
		re, err := newRegexMatcher(pat, ImplRegexp2)
		if err != nil {
			panic(err)
		}
		out = append(out, [2]matcher{hand, re})
	}
	return out
})

// checkSplitters compares the hand-written and regexp2 matchers of both
// patterns on s.
func checkSplitters(t *testing.T, s string) {
	t.Helper()
	for k, p := range splitterPairs() {
		a := p[0].matches(s, nil)
		b := p[1].matches(s, nil)
		pat := qwenPattern
		if k == 1 {
			pat = gpt2Pattern
		}
		if !slices.Equal(a, b) && !longSException(pat, s) {
			t.Fatalf("pattern %.20q on %q: hand %v, regexp2 %v", pat, s, a, b)
		}
	}
}

// longSException: regexp2's (?i) does not fold U+017F to 's' while
// Oniguruma, which HF uses, does; the hand-written matcher follows Oniguruma.
func longSException(pat, s string) bool {
	return pat == qwenPattern && strings.Contains(s, "'ſ")
}

func TestBadTokenizerFiles(t *testing.T) {
	good, err := os.ReadFile(testdata("small-bpe.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	json.Unmarshal(good, &doc)
	edit := func(f func(m map[string]any)) []byte {
		var d map[string]any
		json.Unmarshal(good, &d)
		f(d)
		b, _ := json.Marshal(d)
		return b
	}
	model := func(d map[string]any) map[string]any { return d["model"].(map[string]any) }
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", good[:len(good)/2], "truncated"},
		{"not json", []byte("{\"model\": [1,}"), "invalid JSON at byte"},
		{"unknown model", edit(func(d map[string]any) { model(d)["type"] = "Unigram" }), `model type "Unigram" is not supported`},
		{"missing merges", edit(func(d map[string]any) { delete(model(d), "merges") }), `BPE model has no "merges"`},
		{"bad merge", edit(func(d map[string]any) { model(d)["merges"] = []any{"h e x"} }), "merges[0]"},
		{"merge out of vocab", edit(func(d map[string]any) { model(d)["merges"] = []any{[]any{"h", "zzz"}} }), `"zzz" is not in the vocab`},
		{"no model", []byte(`{"added_tokens": []}`), `no "model"`},
		{"unknown normalizer", edit(func(d map[string]any) { d["normalizer"] = map[string]any{"type": "Precompiled"} }), `normalizer type "Precompiled" is not supported`},
		{"unknown pre-tokenizer", edit(func(d map[string]any) { d["pre_tokenizer"] = map[string]any{"type": "Metaspace"} }), `pre-tokenizer type "Metaspace" is not supported`},
		{"unknown decoder", edit(func(d map[string]any) { d["decoder"] = map[string]any{"type": "Metaspace"} }), `decoder type "Metaspace" is not supported`},
		{"bad behavior", edit(func(d map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"String": " "}, "behavior": "Sideways"}
		}), `unknown split behavior "Sideways"`},
		{"bad regex", edit(func(d map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"Regex": "(["}, "behavior": "Isolated"}
		}), "regex"},
		{"wrong type", edit(func(d map[string]any) { model(d)["vocab"] = []any{1} }), `field "vocab"`},
	}
	for _, c := range cases {
		_, err := Parse(c.data, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	// Load names the file.
	dir := t.TempDir()
	p := filepath.Join(dir, "tokenizer.json")
	os.WriteFile(p, good[:100], 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("Load(dir) of a truncated file: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

// TestMergesAsStrings loads the small BPE with its merges in the older
// "a b" encoding and checks the ids do not change.
func TestMergesAsStrings(t *testing.T) {
	good, _ := os.ReadFile(testdata("small-bpe.json"))
	var d map[string]any
	json.Unmarshal(good, &d)
	m := d["model"].(map[string]any)
	var legacy []any
	for _, p := range m["merges"].([]any) {
		pp := p.([]any)
		legacy = append(legacy, pp[0].(string)+" "+pp[1].(string))
	}
	m["merges"] = legacy
	b, _ := json.Marshal(d)
	tok, err := Parse(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range readJSONL[golden](t, testdata("small-bpe-golden.jsonl"))[:200] {
		if got := tok.Encode(r.Text); !slices.Equal(got, r.IDs) {
			t.Fatalf("row %d: got %v want %v", i+1, got, r.IDs)
		}
	}
}
