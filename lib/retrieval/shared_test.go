package retrieval

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/testenv"
)

// sharedData returns ../shared/data/<rel> beside the repository root, or skips
// the test when the shared data is not there.
func sharedData(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(testenv.SharedData(t), rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("real data %s not present in ../shared/data", rel)
	}
	return p
}

var hotpotFiles = []string{
	"hotpotqa/dev-with-paragraphs-a.jsonl",
	"hotpotqa/dev-with-paragraphs-b.jsonl",
	"hotpotqa/dev-with-paragraphs-c.jsonl",
}

type hotpotQuestion struct {
	Question string
	Gold     []string // distinct supporting titles
}

// hotpotCorpus converts the three HotpotQA dev files into a corpus file in dir
// and returns it with the questions and their gold titles.
func hotpotCorpus(t testing.TB, dir string) (string, []hotpotQuestion) {
	t.Helper()
	var files []string
	for _, f := range hotpotFiles {
		files = append(files, sharedData(t, f))
	}
	var buf bytes.Buffer
	if _, err := ConvertCorpus(FromHotpotQA, files, &buf); err != nil {
		t.Fatal(err)
	}
	corpus := filepath.Join(dir, "hotpot-corpus.jsonl")
	if err := os.WriteFile(corpus, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var qs []hotpotQuestion
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		err = fileio.EachJSONL(r, f, func(line int, raw []byte) error {
			var rec struct {
				Question        string `json:"question"`
				SupportingFacts struct {
					Title []string `json:"title"`
				} `json:"supporting_facts"`
			}
			if err := json.Unmarshal(raw, &rec); err != nil {
				return err
			}
			q := hotpotQuestion{Question: rec.Question}
			seen := map[string]bool{}
			for _, tt := range rec.SupportingFacts.Title {
				if !seen[tt] {
					seen[tt] = true
					q.Gold = append(q.Gold, tt)
				}
			}
			qs = append(qs, q)
			return nil
		})
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return corpus, qs
}

var hotpotIndexOnce struct {
	sync.Once
	dir, corpus string
	qs          []hotpotQuestion
	err         error
}

// hotpotIndex builds (once per test binary) the default index over the
// HotpotQA paragraphs.
func hotpotIndex(t testing.TB) (string, []hotpotQuestion) {
	t.Helper()
	sharedData(t, hotpotFiles[0])
	o := &hotpotIndexOnce
	o.Do(func() {
		tmp, err := os.MkdirTemp("", "mempo-hotpot-index-")
		if err != nil {
			o.err = err
			return
		}
		o.corpus, o.qs = hotpotCorpus(t, tmp)
		o.dir = filepath.Join(tmp, "index")
		_, o.err = Build(context.Background(), BuildOptions{Corpus: o.corpus, Out: o.dir, Analyzer: DefaultAnalyzer})
	})
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.dir, o.qs
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range []string{hotpotIndexOnce.dir, fixtureIndexOnce.dir} {
		if dir != "" {
			os.RemoveAll(filepath.Dir(dir))
		}
	}
	os.Exit(code)
}
