package encoder

import (
	"path/filepath"
	"slices"
	"testing"
)

// Save writes a checkpoint that Load reads back to the same forward.
func TestSaveLoad(t *testing.T) {
	e, _, _ := loadFixture(t)
	cfg := oddConfigs[1]
	cfg.VocabSize = e.Tok.VocabSize() + 3
	r, err := Random(cfg, e.Tok, 9, Options{Family: "e5"})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "random-e5")
	if err := r.Save(dir, filepath.Join(modelDir, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	back, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if back.Family != "e5" || back.Cfg.HiddenSize != cfg.HiddenSize || back.Cfg.LayerNormEps != cfg.LayerNormEps {
		t.Errorf("loaded back: family %s, config %+v", back.Family, back.Cfg)
	}
	texts := []string{"who wrote hamlet?", "the quick brown fox"}
	a, err := r.EmbedQueries(texts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := back.EmbedQueries(texts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(slices.Concat(a...), slices.Concat(b...)) {
		t.Error("a saved and reloaded encoder embeds differently")
	}
}
