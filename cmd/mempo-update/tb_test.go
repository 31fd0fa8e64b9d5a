package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/testenv"
	"github.com/mempo/mempo/lib/update"
)

// --tb writes one event per optimizer step holding the metrics row's
// numbers (float32, as TensorBoard stores them); what the run did not
// compute (entropy without --entropy-metric) is absent, not 0. With
// MEMPO_TB_OUT set the event directory is copied there for
// scripts/check_tensorboard.py.
func TestTensorBoardScalars(t *testing.T) {
	f := newUpdFixture(t)
	out, tb := filepath.Join(f.root, "out"), filepath.Join(f.root, "tb")
	args := append([]string{"--model", f.model, "--ref", f.ref, "--rollouts", f.rollouts, "--out", out, "--tb", tb}, knobArgs...)
	if msg, err := runUpdateCmd(t, args...); err != nil {
		t.Fatal(msg, err)
	}
	rows, err := records.ReadFile[records.Update](filepath.Join(out, update.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	evs, file := testenv.EventFile(t, tb)
	if len(evs) != 1+len(rows) || evs[0].FileVersion != "brain.Event:2" {
		t.Fatalf("%d events for %d rows", len(evs), len(rows))
	}
	for i, r := range rows {
		ev := evs[i+1]
		got := map[string]float64{}
		for _, s := range ev.Scalars {
			got[s.Tag] = s.Value
		}
		if ev.Step != r.Step || got["update/loss"] != float64(float32(r.Loss)) || got["update/ppo_kl"] != float64(float32(r.PPOKL)) {
			t.Errorf("step %d: event %+v, row %+v", r.Step, ev, r)
		}
		if _, ok := got["update/entropy"]; ok {
			t.Errorf("step %d: entropy written though not computed", r.Step)
		}
		if v, ok := got["update/kl"]; !ok || r.KL == nil || v != float64(float32(*r.KL)) {
			t.Errorf("step %d: kl %v (%v) vs row %v", r.Step, v, ok, r.KL)
		}
	}
	if dst := envconfig.TBOut.Get(); dst != "" {
		raw, _ := os.ReadFile(file)
		os.MkdirAll(filepath.Join(dst, "update"), 0o755)
		if err := os.WriteFile(filepath.Join(dst, "update", filepath.Base(file)), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := records.WriteFile(filepath.Join(dst, "update", "metrics.jsonl"), rows); err != nil {
			t.Fatal(err)
		}
	}
}
