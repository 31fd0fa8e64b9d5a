package testenv

import (
	"image/png"
	"os"
	"testing"
)

// CheckPNG fails the test unless path is a PNG image that decodes (the
// reports' figures).
func CheckPNG(t testing.TB, path string) {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := png.Decode(fh); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
