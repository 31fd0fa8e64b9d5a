package retrieval

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/faiss"
)

// Every QA layout in the shared data converts; counts are what the files hold
// (MuSiQue's question paragraphs are all in its corpus file, so both together
// give the corpus size). The HotpotQA dev layout is converted by
// TestHotpotRecall, which checks its 10,787 passages.
func TestConvertSharedLayouts(t *testing.T) {
	cases := []struct {
		from     string
		files    []string
		passages int
	}{
		{FromHotpotQA, []string{"hotpotqa/train-with-paragraphs.jsonl"}, 4968},
		{FromMuSiQue, []string{"musique/train-with-paragraphs.json", "musique/train-corpus.json"}, 1890},
		{From2Wiki, []string{"2wikimultihopqa/corpus.json"}, 6119},
		{FromFlashRAG, []string{"wiki18/wiki18-first-1000.jsonl"}, 1000},
	}
	for _, c := range cases {
		var files []string
		for _, f := range c.files {
			files = append(files, sharedData(t, f))
		}
		var buf bytes.Buffer
		st, err := ConvertCorpus(c.from, files, &buf)
		if err != nil {
			t.Fatalf("%s %v: %v", c.from, c.files, err)
		}
		if st.Passages != c.passages {
			t.Errorf("%s %v: %d passages, want %d", c.from, c.files, st.Passages, c.passages)
		}
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		var p Passage
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &p); err != nil || p.ID != strconv.Itoa(c.passages-1) {
			t.Errorf("%s: last row %q", c.from, lines[len(lines)-1])
		}
		if title, text := SplitContents(p.Contents); title == "" || text == "" || !strings.HasPrefix(p.Contents, "\"") {
			t.Errorf("%s: row not in wiki-18 layout: %q", c.from, p.Contents)
		}
	}
	// wiki-18 rows pass through the flashrag layout unchanged.
	raw, _ := os.ReadFile(sharedData(t, "wiki18/wiki18-first-1000.jsonl"))
	var first Passage
	json.Unmarshal([]byte(strings.SplitN(string(raw), "\n", 2)[0]), &first)
	var buf bytes.Buffer
	ConvertCorpus(FromFlashRAG, []string{sharedData(t, "wiki18/wiki18-first-1000.jsonl")}, &buf)
	var got Passage
	json.Unmarshal([]byte(strings.SplitN(buf.String(), "\n", 2)[0]), &got)
	if got.Contents != first.Contents {
		t.Errorf("flashrag pass-through changed contents:\n%q\n%q", got.Contents, first.Contents)
	}
}

func TestSynthesizeCorpus(t *testing.T) {
	src := []Passage{{ID: "a", Contents: "\"One\"\nalpha beta gamma delta epsilon"}, {ID: "b", Contents: "\"Two\"\nzeta eta theta iota kappa"}}
	var b1, b2 bytes.Buffer
	if err := SynthesizeCorpus(&b1, src, 7, 5); err != nil {
		t.Fatal(err)
	}
	SynthesizeCorpus(&b2, src, 7, 5)
	if b1.String() != b2.String() {
		t.Fatal("same seed, different output")
	}
	lines := strings.Split(strings.TrimSpace(b1.String()), "\n")
	if len(lines) != 7 {
		t.Fatalf("%d rows", len(lines))
	}
	var p0, p6 Passage
	json.Unmarshal([]byte(lines[0]), &p0)
	json.Unmarshal([]byte(lines[6]), &p6)
	if p0.Contents != src[0].Contents || p6.ID != "6" || !strings.HasPrefix(p6.Contents, "\"One (variant 3)\"\n") {
		t.Fatalf("rows: %+v %+v", p0, p6)
	}
}

// rowEncoder stands in for the e5 encoder: query "i" becomes base vector i.
type rowEncoder struct{ base [][]float32 }

func (e rowEncoder) Dim() int { return len(e.base[0]) }
func (e rowEncoder) Encode(_ context.Context, qs []string) ([][]float32, error) {
	out := make([][]float32, len(qs))
	for i, q := range qs {
		n, err := strconv.Atoi(q)
		if err != nil {
			return nil, err
		}
		out[i] = e.base[n]
	}
	return out, nil
}

// The QueryEncoder seam: a Local searcher in dense mode encodes the queries
// and searches the FAISS index.
func TestLocalDenseWithEncoder(t *testing.T) {
	ix := fixtureIndex(t)
	f, _ := os.Open(filepath.Join(faissFixture, "base.npy"))
	r, err := faiss.NewNPYReader(f)
	if err != nil {
		t.Fatal(err)
	}
	flat, _ := r.ReadAll()
	f.Close()
	var base [][]float32
	for i := 0; i < int(r.Rows); i++ {
		base = append(base, flat[i*r.Dim:(i+1)*r.Dim])
	}
	var s Searcher = &Local{Index: ix, Method: MethodDense, Encoder: rowEncoder{base}}
	hits, err := s.Search(context.Background(), []string{"5", "321"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits[0]) != 3 || hits[0][0].ID != "5" || hits[1][0].ID != "321" || hits[1][0].Title != "Vector 321" || abs(hits[0][0].Score-1) > 1e-5 {
		t.Fatalf("dense hits: %+v", hits)
	}
	if _, err := (&Local{Index: ix, Method: MethodDense}).Search(context.Background(), []string{"1"}, 3); err == nil {
		t.Fatal("dense search without an encoder did not fail")
	}
}
