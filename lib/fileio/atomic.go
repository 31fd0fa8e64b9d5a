package fileio

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// AtomicFile is an output written under a temporary name beside its target and
// renamed over it by Commit, so a reader never sees a half-written file and an
// existing file is only replaced by a complete one. Path "-" writes to stdout.
type AtomicFile struct {
	io.Writer
	path string
	tmp  *os.File
	done bool
}

// Create starts an atomic output at path.
func Create(path string) (*AtomicFile, error) {
	if path == "-" {
		return &AtomicFile{Writer: os.Stdout, path: path}, nil
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", path, unwrapPathError(err))
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, unwrapPathError(err))
	}
	return &AtomicFile{Writer: tmp, path: path, tmp: tmp}, nil
}

// Path is the final path of the output.
func (a *AtomicFile) Path() string { return a.path }

// Commit flushes, syncs and renames the temporary file over the target.
func (a *AtomicFile) Commit() error {
	if a.done {
		return nil
	}
	a.done = true
	if a.tmp == nil {
		return nil
	}
	if err := a.tmp.Sync(); err != nil {
		a.tmp.Close()
		os.Remove(a.tmp.Name())
		return fmt.Errorf("%s: %w", a.path, err)
	}
	if err := a.tmp.Chmod(0o644); err != nil {
		a.tmp.Close()
		os.Remove(a.tmp.Name())
		return fmt.Errorf("%s: %w", a.path, err)
	}
	if err := a.tmp.Close(); err != nil {
		os.Remove(a.tmp.Name())
		return fmt.Errorf("%s: %w", a.path, err)
	}
	if err := os.Rename(a.tmp.Name(), a.path); err != nil {
		os.Remove(a.tmp.Name())
		return fmt.Errorf("%s: %w", a.path, unwrapPathError(err))
	}
	return nil
}

// Abort discards the temporary file; the target is untouched. Calling it after
// Commit does nothing, so `defer out.Abort()` is always safe.
func (a *AtomicFile) Abort() {
	if a.done {
		return
	}
	a.done = true
	if a.tmp != nil {
		a.tmp.Close()
		os.Remove(a.tmp.Name())
	}
}

// WriteFileAtomic writes data to path through an AtomicFile.
func WriteFileAtomic(path string, data []byte) error {
	out, err := Create(path)
	if err != nil {
		return err
	}
	defer out.Abort()
	if _, err := out.Write(data); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return out.Commit()
}

// TempDirBeside makes an empty directory next to dir for building a
// replacement of it; ReplaceDir then swaps it in (RemoveTempDir discards
// it). What killed builds of dir left beside it is removed first
// (building.go).
func TempDirBeside(dir string) (string, error) {
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("%s: %w", dir, unwrapPathError(err))
	}
	removeStale(parent, filepath.Base(filepath.Clean(dir)))
	tmp, err := newBuildingDir(parent, filepath.Base(filepath.Clean(dir)))
	if err != nil {
		return "", fmt.Errorf("%s: %w", dir, unwrapPathError(err))
	}
	return tmp, nil
}

// ReplaceDir moves the finished directory built over dir. An existing dir is
// first renamed aside and removed only after the new one is in place, so a
// failure at any point leaves either the old or the new directory whole.
func ReplaceDir(built, dir string) error {
	dir = filepath.Clean(dir)
	// Two runs replacing the same dir at once take turns (building.go).
	unlock := lockParent(dir)
	defer unlock()
	old := ""
	if _, err := os.Stat(dir); err == nil {
		old = dir + ".old-" + filepath.Base(built)
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("%s: %w", dir, unwrapPathError(err))
		}
	}
	if err := os.Rename(built, dir); err != nil {
		if old != "" {
			os.Rename(old, dir)
		}
		return fmt.Errorf("%s: %w", dir, unwrapPathError(err))
	}
	releaseBuilding(built)
	if old != "" {
		os.RemoveAll(old)
	}
	return nil
}
