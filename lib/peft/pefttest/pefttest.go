// Package pefttest makes the adapter fixtures of the commands' tests: a
// random LoRA adapter over a model directory, written in peft's format, and
// the same adapter merged into a full checkpoint, so a test can check that a
// command given --adapter behaves as the merged model does.
package pefttest

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/peft"
)

// AdapterAndMerged writes, under dir, adapter/ (an adapter of cfg over the
// model in base, with A as peft initializes it and B random normal of std
// scale, so it changes the model) and merged/ (base with it merged), and
// returns both paths.
func AdapterAndMerged(t testing.TB, base, dir string, cfg peft.Config, seed uint64, scale float64) (adapter, merged string) {
	t.Helper()
	ck, err := checkpoint.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	tensors, err := ck.LoadAll()
	if err != nil {
		t.Fatal(err)
	}
	mc := ck.Config
	ck.Close()
	m, err := model.New(mc, tensors, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AttachLoRA(cfg, seed); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 3))
	for _, name := range m.TrainableNames() {
		p := m.Param(name)
		for i := range p {
			p[i] = float32(scale * r.NormFloat64())
		}
		if err := m.SetParam(name, p); err != nil {
			t.Fatal(err)
		}
	}
	ad := m.Adapter()
	adapter, merged = filepath.Join(dir, "adapter"), filepath.Join(dir, "merged")
	if err := peft.Write(adapter, ad, nil); err != nil {
		t.Fatal(err)
	}
	shapes := map[string][]int{}
	for _, s := range mc.Tensors() {
		shapes[s.Name] = s.Shape
	}
	if err := ad.Merge(tensors, mc.NumLayers, shapes); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Save(merged, mc, tensors, checkpoint.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	return adapter, merged
}
