package rollout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/tasks"
)

// Settings are the options that change what a run samples, by name: a
// journal written under other settings cannot be resumed.
type Settings map[string]string

// Journal is the resumable state of a run beside its output: run.json with
// the settings (a JSON object of strings), and one Parquet file per finished
// task (its G rows), each written atomically, so a kill at any moment leaves
// whole tasks only.
type Journal struct {
	dir       string
	groupSize int
	tasks     []tasks.Task
	done      map[int64]bool
}

const journalSettings = "run.json"

func taskFile(dir string, group int64) string {
	return filepath.Join(dir, fmt.Sprintf("task-%08d.parquet", group))
}

// OpenJournal opens or starts the journal at dir for a run of all with
// groupSize (G) samples per task, and returns the task indices already
// finished.
func OpenJournal(dir string, set Settings, groupSize int, all []tasks.Task) (*Journal, map[int64]bool, error) {
	j := &Journal{dir: dir, groupSize: groupSize, tasks: all, done: map[int64]bool{}}
	sp := filepath.Join(dir, journalSettings)
	raw, err := os.ReadFile(sp)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", dir, err)
		}
		raw, err := encodeSettings(set)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", sp, err)
		}
		if err := fileio.WriteFileAtomic(sp, raw); err != nil {
			return nil, nil, err
		}
		return j, j.done, nil
	case err != nil:
		return nil, nil, fmt.Errorf("%s: %w", sp, err)
	}
	old, err := decodeSettings(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", sp, err)
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if old[k] != set[k] {
			return nil, nil, fmt.Errorf("%s: the unfinished run there has %s = %q, this one %q; rerun with its settings to resume, or remove %s to start over", dir, k, old[k], set[k], dir)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", dir, err)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			// The temporary file of a task being written when the run was
			// killed: that task was not finished.
			os.Remove(filepath.Join(dir, name))
			continue
		}
		var g int64
		if n, _ := fmt.Sscanf(name, "task-%d.parquet", &g); n != 1 || name != filepath.Base(taskFile(dir, g)) {
			continue
		}
		path := filepath.Join(dir, name)
		if g < 0 || g >= int64(len(all)) {
			return nil, nil, fmt.Errorf("%s: group %d is past the %d tasks; remove %s to start over", path, g, len(all), dir)
		}
		rows, err := records.ReadFile[records.Rollout](path)
		if err != nil {
			return nil, nil, fmt.Errorf("%v (remove %s to start over)", err, dir)
		}
		seen := map[int32]bool{}
		for _, r := range rows {
			if r.TaskID != all[g].TaskID || r.Group != g || r.Sample < 0 || int(r.Sample) >= groupSize || seen[r.Sample] {
				return nil, nil, fmt.Errorf("%s: row of task %q group %d sample %d does not belong to task %d (%s) of this run; remove %s to start over", path, r.TaskID, r.Group, r.Sample, g, all[g].TaskID, dir)
			}
			seen[r.Sample] = true
		}
		if len(rows) != groupSize {
			return nil, nil, fmt.Errorf("%s: %d rows, want %d; remove %s to start over", path, len(rows), groupSize, dir)
		}
		j.done[g] = true
	}
	return j, j.done, nil
}

// encodeSettings writes the settings as an indented JSON object, keys
// sorted, HTML characters left as they are (a lead-in holds "<answer>").
func encodeSettings(s Settings) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(map[string]string(s)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func decodeSettings(raw []byte) (Settings, error) {
	s := Settings{}
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("not a settings object: %v", err)
	}
	return s, nil
}

// Put journals the rows of a finished task.
func (j *Journal) Put(group int64, rows []records.Rollout) error {
	if err := records.WriteFile(taskFile(j.dir, group), rows); err != nil {
		return err
	}
	j.done[group] = true
	return nil
}

// Merge writes the journaled tasks 0..n-1 into out (and, when jsonl is not
// empty, a readable copy with every step's text decoded by tok), in task
// order, then removes the journal. It returns the rows written and their
// mean R^T.
func (j *Journal) Merge(out, jsonl string, n int, tok Tok) (int, float64, error) {
	groups := make([]int64, n)
	for g := range groups {
		groups[g] = int64(g)
	}
	return j.MergeGroups(out, jsonl, groups, tok)
}

// MergeGroups is Merge of the given task groups only, in their order (the
// shard of a `--shard i/n` run).
func (j *Journal) MergeGroups(out, jsonl string, groups []int64, tok Tok) (int, float64, error) {
	w, err := records.Create[records.Rollout](out)
	if err != nil {
		return 0, 0, err
	}
	defer w.Abort()
	var jw *records.Writer[records.Rollout]
	if jsonl != "" {
		if jw, err = records.Create[records.Rollout](jsonl); err != nil {
			return 0, 0, err
		}
		defer jw.Abort()
	}
	rows, rt := 0, 0.0
	for _, g := range groups {
		if !j.done[g] {
			return 0, 0, fmt.Errorf("%s: task %d (%s) has no rows; rerun to finish it", j.dir, g, j.tasks[g].TaskID)
		}
		rs, err := records.ReadFile[records.Rollout](taskFile(j.dir, g))
		if err != nil {
			return 0, 0, err
		}
		sort.Slice(rs, func(a, b int) bool { return rs[a].Sample < rs[b].Sample })
		if err := w.Write(rs...); err != nil {
			return 0, 0, err
		}
		for i := range rs {
			rt += rs[i].RewardTask
			rows++
		}
		if jw != nil {
			for i := range rs {
				for k := range rs[i].Steps {
					s := &rs[i].Steps[k]
					s.ContextText = tok.Decode(records.IDs(s.ContextIDs))
					s.OutputText = tok.Decode(records.IDs(s.OutputIDs))
				}
			}
			if err := jw.Write(rs...); err != nil {
				return 0, 0, err
			}
		}
	}
	if err := w.Commit(); err != nil {
		return 0, 0, err
	}
	if jw != nil {
		if err := jw.Commit(); err != nil {
			return 0, 0, err
		}
	}
	if err := os.RemoveAll(j.dir); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", j.dir, err)
	}
	if rows > 0 {
		rt /= float64(rows)
	}
	return rows, rt, nil
}
