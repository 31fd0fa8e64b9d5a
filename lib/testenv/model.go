package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mempo/mempo/lib/checkpoint"
)

// TinyTextModel writes a random "tiny" checkpoint (vocabulary 512, EOS 503,
// no BOS, no generation config) with the repository's word-level
// tokenizer.json to dir, for tests that feed a model text rather than ids.
func TinyTextModel(t testing.TB, dir string) {
	t.Helper()
	cfg, err := checkpoint.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.VocabSize, cfg.EOSTokenIDs, cfg.BOSTokenID, cfg.Generation = 512, []int{503}, nil, nil
	if err := checkpoint.Save(dir, cfg, checkpoint.RandomInit(cfg, 1), checkpoint.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	tj, err := os.ReadFile(filepath.Join(RepoRoot(t), "testdata", "tokenizer", "wordlevel.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tj, 0o644); err != nil {
		t.Fatal(err)
	}
}
