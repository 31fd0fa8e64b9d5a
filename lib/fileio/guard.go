package fileio

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Named is a path given to a command with the flag that gave it.
type Named struct {
	Flag, Path string
	// Replaces marks an output that, when a directory, is replaced as a
	// whole (an index, a checkpoint), so an input inside it would be lost;
	// other outputs only write files into a directory.
	Replaces bool
}

// resolve makes a path absolute and resolves the symbolic links of its
// longest existing prefix, so "a/../b", "./b" and a link to b all name b.
func resolve(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	rest := ""
	for cur := abs; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

func (n Named) label() string {
	if n.Flag == "" {
		return "argument " + n.Path
	}
	return "--" + n.Flag + " " + n.Path
}

func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// CheckOutputs refuses outputs that would destroy an input: an output that
// is an input (after resolving relative paths and symbolic links, or the
// same file by another hard link), or an output directory that is replaced
// whole and holds an input (replacing it would delete the input). Two
// outputs naming one path are refused too: the second written would replace
// the first. Empty paths and "-" are skipped.
func CheckOutputs(inputs, outputs []Named) error {
	for i, o := range outputs {
		if o.Path == "" || o.Path == "-" {
			continue
		}
		ro := resolve(o.Path)
		for _, p := range outputs[:i] {
			if p.Path != "" && p.Path != "-" && resolve(p.Path) == ro {
				return fmt.Errorf("%s is also the output %s: give each output its own path", o.label(), p.label())
			}
		}
		ost, oerr := os.Stat(ro)
		for _, in := range inputs {
			if in.Path == "" || in.Path == "-" {
				continue
			}
			ri := resolve(in.Path)
			same := ri == ro
			if !same && oerr == nil {
				if ist, err := os.Stat(ri); err == nil && os.SameFile(ist, ost) {
					same = true
				}
			}
			switch {
			case same:
				return fmt.Errorf("%s is also the input %s: refusing to overwrite an input (write elsewhere, then move it)", o.label(), in.label())
			case o.Replaces && within(ri, ro):
				return fmt.Errorf("%s would replace the directory that holds the input %s: write elsewhere", o.label(), in.label())
			}
		}
	}
	return nil
}
