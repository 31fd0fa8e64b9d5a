package update

import (
	"fmt"
	"path/filepath"

	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/optim"
	"github.com/mempo/mempo/lib/peft"
	"github.com/mempo/mempo/lib/records"
)

// LoRA updates: the model carries an adapter over a frozen base
// (model.AttachLoRA, model.LoadAdapter), the trainer and the optimizer see
// only the adapter's factors (Model.TrainableNames), the KL reference is the
// base itself with the adapter switched off, and the output directory is a
// peft adapter directory with the optimizer file and the metrics beside it.

// BaseRefLogProbs is RefLogProbs with the reference being m's frozen base:
// the adapter is disabled while the reference log-probs are computed, so no
// second model is held in memory.
func BaseRefLogProbs(m *model.Model, b *Batch, trajs []int, maxTok int) error {
	if !m.HasAdapter() {
		return fmt.Errorf("update: the base-as-reference needs a model with an adapter")
	}
	m.SetAdapterEnabled(false)
	defer m.SetAdapterEnabled(true)
	return RefLogProbs(m, b, trajs, maxTok)
}

// SaveAdapterCheckpoint writes dir as a whole or not at all: the adapter in
// peft's format (adapter_config.json naming base as
// base_model_name_or_path, adapter_model.safetensors in float32), the
// optimizer file (moments of the adapter's factors only) and the metrics
// rows. As SaveCheckpoint, it is built beside dir and swapped in.
func SaveAdapterCheckpoint(dir string, m *model.Model, base string, st optim.State, rs RunState, rows []records.Update) error {
	a := m.Adapter()
	if a == nil {
		return fmt.Errorf("update: the model has no adapter to save")
	}
	if abs, err := filepath.Abs(base); err == nil {
		base = abs
	}
	a.Config.Base = base
	shapes := map[string][]int{}
	for _, name := range m.TrainableNames() {
		shapes[name] = m.ParamShape(name)
	}
	return peft.Write(dir, a, map[string]func(string) error{
		OptimizerFile: func(p string) error { return WriteOptimizer(p, st, rs, shapes) },
		MetricsFile:   func(p string) error { return records.WriteFile(p, rows) },
	})
}
