package fileio

import (
	"fmt"
	"os"
)

// CheckReplaceable is called before a command replaces the directory dir
// as a whole: a missing or empty dir, or one that holds a marker file of
// the command's own kind of output (index.json, config.json, ...), may be
// replaced; any other directory only with force, since replacing it
// deletes what it holds. A regular file at dir is always refused.
func CheckReplaceable(flag, dir string, force bool, markers ...string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return nil // missing (or unreadable: the write reports that)
	}
	if !st.IsDir() {
		return fmt.Errorf("--%s %s: is a file, not a directory", flag, dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 || force {
		return nil
	}
	for _, m := range markers {
		if _, err := os.Stat(dir + string(os.PathSeparator) + m); err == nil {
			return nil
		}
	}
	return fmt.Errorf("--%s %s: the directory holds %d entries (%s, ...) and no %s: not an output of this command; replacing it would delete them (use --force to replace it anyway)",
		flag, dir, len(ents), ents[0].Name(), markers[0])
}
