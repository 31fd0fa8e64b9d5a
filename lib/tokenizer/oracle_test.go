package tokenizer

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// The expected values in this file were printed by testdata/hf_oracle.py
// with HF tokenizers 0.23.2 on the GPU machine.

// withAdded returns the tokenizer.json at path with extra added tokens.
func withAdded(t *testing.T, path string, extra ...map[string]any) *Tokenizer {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	json.Unmarshal(data, &d)
	for _, e := range extra {
		d["added_tokens"] = append(d["added_tokens"].([]any), e)
	}
	b, _ := json.Marshal(d)
	tok, err := Parse(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func checkIDs(t *testing.T, tok *Tokenizer, cases map[string][]int) {
	t.Helper()
	for in, want := range cases {
		if got := tok.Encode(in); !slices.Equal(got, want) {
			t.Errorf("%q: %v, HF %v", in, got, want)
		}
	}
}

func TestAddedTokenFlags(t *testing.T) {
	tok := withAdded(t, testdata("small-bpe.json"),
		map[string]any{"id": 512, "content": "<L>", "lstrip": true, "rstrip": true, "special": true},
		map[string]any{"id": 513, "content": "cat", "single_word": true})
	checkIDs(t, tok, map[string][]int{
		"a  <L>  b":       {67, 512, 68},
		"x<L>y":           {90, 512, 91},
		"cat concat cats": {513, 281, 265, 69, 266, 281, 266, 85},
		"the cat.":        {86, 259, 223, 513, 16},
		"_cat cat_":       {65, 69, 266, 281, 266, 65},
		"<L>":             {512},
		"  <L>":           {512},
	})
}

func TestByteLevelAddPrefixSpace(t *testing.T) {
	data, _ := os.ReadFile(testdata("small-bpe.json"))
	var d map[string]any
	json.Unmarshal(data, &d)
	d["pre_tokenizer"] = map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}
	b, _ := json.Marshal(d)
	tok, err := Parse(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkIDs(t, tok, map[string][]int{
		"hello":                {223, 259, 78, 78, 81},
		" hello":               {223, 259, 78, 78, 81},
		"hello<|im_end|>world": {223, 259, 78, 78, 81, 2, 269, 268, 426},
		"<|im_end|> x":         {2, 223, 90},
		"a\nb":                 {287, 201, 68},
	})
}

// TestNormalizedAddedToken: a token with normalized=true is matched in the
// normalized (here lowercased) text, one with normalized=false only as
// written.
func TestNormalizedAddedToken(t *testing.T) {
	tok := withAdded(t, testdata("wordlevel.json"),
		map[string]any{"id": 504, "content": "Zebra", "normalized": true},
		map[string]any{"id": 505, "content": "Yak", "normalized": false})
	checkIDs(t, tok, map[string][]int{
		"ZEBRA":      {504},
		"a zebra!":   {2, 504, 0},
		"Yak":        {505},
		"YAK":        {0},
		"zebrazebra": {504, 504},
	})
	if got := (lowercase{}).normalize("İSTANBUL ΣΑΣ"); got != "i̇stanbul σασ" {
		t.Errorf("lowercase = %q", got)
	}
}

func TestSplitBehaviors(t *testing.T) {
	s := "the-final--countdown"
	for b, want := range map[behavior][]string{
		behRemoved:            {"the", "final", "countdown"},
		behIsolated:           {"the", "-", "final", "-", "-", "countdown"},
		behMergedWithPrevious: {"the-", "final-", "-", "countdown"},
		behMergedWithNext:     {"the", "-final", "-", "-countdown"},
		behContiguous:         {"the", "-", "final", "--", "countdown"},
	} {
		st := &splitStep{m: literalMatcher{"-"}, behavior: b}
		if got := st.apply([]string{s}, nil, new(scratch)); !slices.Equal(got, want) {
			t.Errorf("behavior %d: %q, HF %q", b, got, want)
		}
	}
	ws := &splitStep{m: wordMatcher{}, behavior: behRemoved, invert: true}
	if got, want := ws.apply([]string{"Hey friend!  How are you?!? é_x2"}, nil, new(scratch)),
		[]string{"Hey", "friend", "!", "How", "are", "you", "?!?", "é_x2"}; !slices.Equal(got, want) {
		t.Errorf("Whitespace: %q, HF %q", got, want)
	}
	wss := &splitStep{m: spaceMatcher{}, behavior: behRemoved}
	if got, want := wss.apply([]string{"a\u00a0b\tc  d"}, nil, new(scratch)), []string{"a", "b", "c", "d"}; !slices.Equal(got, want) {
		t.Errorf("WhitespaceSplit: %q, HF %q", got, want)
	}
}
