package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// The WordPiece fixture (testdata/encoder/tokenizer.json) and its goldens
// were made by scripts/golden_bert.py with HF tokenizers 0.23. Its
// post_processor is null (BertWordPieceTokenizer only installs
// BertProcessing when built from an existing vocab), so HF added no
// [CLS]/[SEP] to the golden ids; the [CLS]/[SEP] path is checked below on
// the same tokenizer with a BERT template put in.
const bertFixture = "../../testdata/encoder/tokenizer.json"

type wpGolden struct {
	Text  string `json:"text"`
	IDs   []int  `json:"ids"`
	Trunc []int  `json:"ids_trunc16"`
}

func readWPGoldens(t *testing.T) []wpGolden {
	t.Helper()
	f, err := os.Open("../../testdata/encoder/tokenizer-golden.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []wpGolden
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var g wpGolden
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	if len(out) < 100 {
		t.Fatalf("only %d goldens", len(out))
	}
	return out
}

func TestWordPieceGoldens(t *testing.T) {
	tok, err := Load(bertFixture)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	nonASCII := 0
	for _, g := range readWPGoldens(t) {
		if got := tok.EncodeSpecial(g.Text, 0); !slices.Equal(got, g.IDs) {
			bad++
			if bad < 5 {
				t.Errorf("%q:\n got %v\n  HF %v", g.Text, got, g.IDs)
			}
		}
		if got := tok.EncodeSpecial(g.Text, 16); !slices.Equal(got, g.Trunc) {
			bad++
			if bad < 5 {
				t.Errorf("%q truncated to 16:\n got %v\n  HF %v", g.Text, got, g.Trunc)
			}
		}
		// The fixture's post-processor adds [CLS] (2) ... [SEP] (3); Encode
		// adds no special tokens, so it gives what lies between them.
		if got := tok.Encode(g.Text); !slices.Equal(got, textIDs(t, g.IDs)) {
			t.Errorf("Encode %q differs from HF", g.Text)
		}
		for _, r := range g.Text {
			if r >= 0x80 {
				nonASCII++
				break
			}
		}
	}
	// The goldens must exercise non-ASCII text (they hold no [UNK]: see
	// TestWordPieceRules for unknown words).
	if nonASCII == 0 {
		t.Errorf("goldens cover %d non-ASCII texts", nonASCII)
	}
}

// textIDs strips the [CLS] (2) and [SEP] (3) that the fixture's BertProcessing
// put around a golden's ids.
func textIDs(t *testing.T, ids []int) []int {
	t.Helper()
	if len(ids) < 2 || ids[0] != 2 || ids[len(ids)-1] != 3 {
		t.Fatalf("golden ids %v are not [CLS] ... [SEP]", ids)
	}
	return ids[1 : len(ids)-1]
}

// withBertTemplate is the fixture with a BERT post-processor added, in the
// form transformers writes for bert-base-uncased / e5-base-v2.
func withBertTemplate(t *testing.T, post string) *Tokenizer {
	t.Helper()
	data, err := os.ReadFile(bertFixture)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]json.RawMessage
	json.Unmarshal(data, &d)
	d["post_processor"] = json.RawMessage(post)
	b, _ := json.Marshal(d)
	tok, err := Parse(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

const bertTemplate = `{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}}],"pair":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}},{"Sequence":{"id":"B","type_id":1}},{"SpecialToken":{"id":"[SEP]","type_id":1}}],"special_tokens":{"[CLS]":{"id":"[CLS]","ids":[2],"tokens":["[CLS]"]},"[SEP]":{"id":"[SEP]","ids":[3],"tokens":["[SEP]"]}}}`

func TestWordPieceSpecialTokensAndTruncation(t *testing.T) {
	for _, post := range []string{bertTemplate, `{"type":"BertProcessing","sep":["[SEP]",3],"cls":["[CLS]",2]}`} {
		tok := withBertTemplate(t, post)
		if tok.SpecialTokensAdded() != 2 {
			t.Fatalf("SpecialTokensAdded %d", tok.SpecialTokensAdded())
		}
		for _, g := range readWPGoldens(t)[:40] {
			if got := tok.EncodeSpecial(g.Text, 0); !slices.Equal(got, g.IDs) {
				t.Fatalf("%q: %v, want %v", g.Text, got, g.IDs)
			}
			// HF keeps max_length-2 text tokens and then adds [CLS]/[SEP].
			body := textIDs(t, g.IDs)
			n := min(len(body), 6)
			want := append(append([]int{2}, body[:n]...), 3)
			if got := tok.EncodeSpecial(g.Text, 8); !slices.Equal(got, want) {
				t.Fatalf("%q to 8: %v, want %v", g.Text, got, want)
			}
		}
	}
}

// Behaviors of BertNormalizer, BertPreTokenizer and WordPiece that a QA
// corpus meets, checked by hand against HF's rules.
func TestWordPieceRules(t *testing.T) {
	tok, err := Load(bertFixture)
	if err != nil {
		t.Fatal(err)
	}
	enc := func(s string) []int { return tok.Encode(s) }
	// Lowercasing and accent stripping: "Café" = "cafe".
	if !slices.Equal(enc("Café"), enc("cafe")) || !slices.Equal(enc("CAFE"), enc("cafe")) {
		t.Errorf("Café %v, cafe %v, CAFE %v", enc("Café"), enc("cafe"), enc("CAFE"))
	}
	// Control characters vanish; any whitespace separates words.
	if !slices.Equal(enc("the\u0000 city\u200b"), enc("the city")) || !slices.Equal(enc("the\t\ncity"), enc("the city")) {
		t.Errorf("clean_text: %v vs %v", enc("the\u0000 city\u200b"), enc("the city"))
	}
	// Format characters (Cf), private use (Co) and unassigned code points
	// are dropped like controls; U+2028 (Zl) is whitespace.
	if !slices.Equal(enc("ci\u00adty\ue000\U000e0001"), enc("city")) || !slices.Equal(enc("the\u2028city"), enc("the city")) {
		t.Errorf("controls: %v %v vs %v", enc("ci\u00adty\ue000"), enc("the\u2028city"), enc("city"))
	}
	// Punctuation is isolated: "a,b" = "a , b"; "$" is ASCII punctuation.
	if !slices.Equal(enc("who,what"), enc("who , what")) || !slices.Equal(enc("$5"), enc("$ 5")) {
		t.Errorf("punctuation: %v vs %v", enc("who,what"), enc("who , what"))
	}
	// CJK characters become words of their own.
	if !slices.Equal(enc("中国"), enc("中 国")) {
		t.Errorf("CJK: %v vs %v", enc("中国"), enc("中 国"))
	}
	// A word longer than max_input_chars_per_word (100) is one [UNK].
	if got := enc(strings.Repeat("a", 101)); !slices.Equal(got, []int{1}) {
		t.Errorf("long word: %v", got)
	}
	// A word with a character outside the vocabulary is one [UNK] whole.
	if _, ok := tok.TokenID("##☃"); ok {
		t.Fatal("☃ is in the vocabulary")
	}
	if got := enc("the city☃s"); !slices.Equal(got, append(enc("the"), 1)) {
		t.Errorf("unknown piece: %v", got)
	}
	// Continuation pieces: the word splits into a head and ## pieces.
	ids := enc("originally")
	if len(ids) < 2 {
		t.Fatalf("originally: %v", ids)
	}
	for i, id := range ids {
		s, _ := tok.Token(id)
		if (i > 0) != strings.HasPrefix(s, "##") {
			t.Errorf("originally piece %d is %q", i, s)
		}
	}
	// Decode glues ## pieces and removes the space before punctuation.
	text, err := tok.Decode(enc("Who wrote the treasure of the sierra madre?"))
	if err != nil || text != "who wrote the treasure of the sierra madre?" {
		t.Errorf("decode: %q %v", text, err)
	}
	d := tok.NewDecoder()
	var sb strings.Builder
	for _, id := range enc("originally built") {
		s, _ := d.Add(id)
		sb.WriteString(s)
	}
	if sb.String() != "originally built" {
		t.Errorf("streamed decode: %q", sb.String())
	}
}

func TestWordPieceBadFiles(t *testing.T) {
	data, _ := os.ReadFile(bertFixture)
	var d map[string]json.RawMessage
	json.Unmarshal(data, &d)
	var m map[string]json.RawMessage
	json.Unmarshal(d["model"], &m)
	m["unk_token"] = json.RawMessage(`"<nope>"`)
	d["model"], _ = json.Marshal(m)
	b, _ := json.Marshal(d)
	if _, err := Parse(b, Options{}); err == nil || !strings.Contains(err.Error(), `unk_token "<nope>"`) {
		t.Errorf("bad unk: %v", err)
	}
	d["model"], _ = json.Marshal(map[string]any{"type": "WordPiece", "vocab": map[string]int{"[UNK]": 0}})
	d["post_processor"] = json.RawMessage(`{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"[X]","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"special_tokens":{}}`)
	b, _ = json.Marshal(d)
	if _, err := Parse(b, Options{}); err == nil || !strings.Contains(err.Error(), `"[X]" is not in special_tokens`) {
		t.Errorf("bad template: %v", err)
	}
}
