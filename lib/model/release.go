package model

// Release frees the model's parameters and gradients on its backend now
// (device memory would otherwise wait for the garbage collector); the model
// must not be used afterwards.
func (m *Model) Release() {
	for _, t := range m.params.byName {
		m.be.Free(t)
	}
	if m.grads != nil {
		for _, t := range m.grads.byName {
			m.be.Free(t)
		}
	}
	m.params, m.grads = nil, nil
}
