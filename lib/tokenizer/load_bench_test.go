package tokenizer

import "testing"

func BenchmarkLoad(b *testing.B) {
	path := qwenPath(b)
	for b.Loop() {
		if _, err := Load(path); err != nil {
			b.Fatal(err)
		}
	}
}
