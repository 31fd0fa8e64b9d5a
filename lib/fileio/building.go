package fileio

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A directory being built beside its target (TempDirBeside) is held with an
// exclusive flock on the directory itself for as long as its process lives,
// so a later run can tell one left behind by a killed process (no holder:
// removed) from one another process is still building (held: left alone).
// The kernel drops the lock when the process dies, kill -9 included.

var building sync.Map // temp dir path → *os.File holding its flock

// newBuildingDir makes .BASE.building-* in parent, already locked: it is
// created as .BASE.new-*, locked, and only then renamed, so no other process
// ever sees an unlocked .building- directory that is alive.
func newBuildingDir(parent, base string) (string, error) {
	fresh, err := os.MkdirTemp(parent, "."+base+".new-*")
	if err != nil {
		return "", err
	}
	f, err := os.Open(fresh)
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		os.Remove(fresh)
		return "", err
	}
	name := filepath.Join(parent, "."+base+".building-"+strings.TrimPrefix(filepath.Base(fresh), "."+base+".new-"))
	if err := os.Rename(fresh, name); err != nil {
		f.Close()
		os.Remove(fresh)
		return "", err
	}
	building.Store(name, f)
	return name, nil
}

// releaseBuilding drops the lock of a temp dir this process made.
func releaseBuilding(path string) {
	if f, ok := building.LoadAndDelete(path); ok {
		f.(*os.File).Close()
	}
}

// RemoveTempDir removes a directory made by TempDirBeside and releases its
// lock; the deferred cleanup of a build that failed or whose result was
// moved elsewhere.
func RemoveTempDir(path string) {
	os.RemoveAll(path)
	releaseBuilding(path)
}

// unheld reports whether no live process holds path's flock.
func unheld(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

// removeStale removes what killed builds of dir left beside it: unheld
// .BASE.building-* directories, .BASE.new-* ones older than a minute (a
// process killed between making and locking one; they are empty), and
// BASE.old-.BASE.building-* (a replaced directory ReplaceDir had not yet
// removed) when BASE itself is in place. It names each on stderr.
func removeStale(parent, base string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	_, baseErr := os.Stat(filepath.Join(parent, base))
	for _, e := range ents {
		n := e.Name()
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(parent, n)
		stale := false
		switch {
		case strings.HasPrefix(n, "."+base+".building-"):
			stale = unheld(p)
		case strings.HasPrefix(n, "."+base+".new-"):
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > time.Minute {
				stale = unheld(p)
			}
		case strings.HasPrefix(n, base+".old-."+base+".building-"):
			stale = baseErr == nil && unheld(p)
		}
		if stale {
			if err := os.RemoveAll(p); err == nil {
				fmt.Fprintf(os.Stderr, "removed %s, left by an interrupted run\n", p)
			}
		}
	}
}

// lockParent holds an exclusive flock on dir's parent until the returned
// function is called: the renames of two ReplaceDir of one dir must not
// interleave (the second would find the first's half-swapped state).
func lockParent(dir string) func() {
	if _, ours := building.Load(filepath.Dir(dir)); ours {
		// A directory this process is building (and holds locked): no other
		// process writes in it.
		return func() {}
	}
	f, err := os.Open(filepath.Dir(dir))
	if err != nil {
		return func() {}
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX) != nil {
		f.Close()
		return func() {}
	}
	return func() { f.Close() }
}
