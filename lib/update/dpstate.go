package update

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/optim"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/safetensors"
)

// A data-parallel checkpoint keeps the optimizer state as one file per
// rank, each holding the moments of the tensors that rank owns, and
// OptimizerFile as their index: no tensors, the RunState and the list of
// shard files in its metadata. ReadOptimizer follows the index, so a
// one-process run, or a run on another number of ranks (which owns other
// tensors), resumes from it: the layout is by tensor name, not by rank.
const (
	metaShards     = "mempo.optimizer_shards"      // number of shard files
	metaShardFiles = "mempo.optimizer_shard_files" // JSON list of their names, in rank order
)

// OptimizerShardFile is rank r's optimizer file of an n-rank checkpoint.
func OptimizerShardFile(r, n int) string {
	return fmt.Sprintf("optimizer.rank%05d-of-%05d.safetensors", r, n)
}

func readShardedOptimizer(path string, meta map[string]string, keep func(string) bool) (optim.State, RunState, error) {
	rs, err := runStateFrom(path, meta)
	if err != nil {
		return optim.State{}, rs, err
	}
	var files []string
	if err := json.Unmarshal([]byte(meta[metaShardFiles]), &files); err != nil {
		return optim.State{}, rs, fmt.Errorf("%s: metadata %s: %v", path, metaShardFiles, err)
	}
	if n, err := strconv.Atoi(meta[metaShards]); err != nil || n != len(files) {
		return optim.State{}, rs, fmt.Errorf("%s: metadata %s=%q does not match its %d shard files", path, metaShards, meta[metaShards], len(files))
	}
	st := optim.State{Steps: map[string]int64{}, ExpAvg: map[string][]float32{}, ExpAvgSq: map[string][]float32{}}
	for _, name := range files {
		if strings.ContainsAny(name, `/\`) {
			return st, rs, fmt.Errorf("%s: shard file %q is not a plain name", path, name)
		}
		p := filepath.Join(filepath.Dir(path), name)
		part, prs, err := readOptimizer(p, keep)
		if err != nil {
			return st, rs, err
		}
		if prs.Fingerprint != rs.Fingerprint || prs.GlobalStep != rs.GlobalStep {
			return st, rs, fmt.Errorf("%s: is from another step than its index %s (global step %d, index %d)", p, path, prs.GlobalStep, rs.GlobalStep)
		}
		for k, n := range part.Steps {
			if _, dup := st.Steps[k]; dup {
				return st, rs, fmt.Errorf("%s: holds %s, which an earlier shard holds too", p, k)
			}
			st.Steps[k], st.ExpAvg[k], st.ExpAvgSq[k] = n, part.ExpAvg[k], part.ExpAvgSq[k]
		}
	}
	return st, rs, nil
}

// ReadOwnedState reads the optimizer state of the tensors this rank owns
// from path (a one-process file or a sharded index, written by any number
// of ranks), and loads it into the trainer's optimizer.
func (d *DataParallel) ReadOwnedState(path string) (RunState, error) {
	st, rs, err := readOptimizer(path, d.Owns)
	if err != nil {
		return rs, err
	}
	if err := CheckState(path, st, d.T.Model); err != nil {
		return rs, err
	}
	return rs, d.T.Opt.LoadState(st)
}

// SaveCheckpoint is the collective SaveCheckpoint of a data-parallel run,
// called by every rank: rank 0 builds dir beside it (weights, metrics,
// index), every rank writes its optimizer shard into the same temporary
// directory (shared storage when the ranks are on several machines), and
// rank 0 swaps the whole in only when every shard is written.
func (d *DataParallel) SaveCheckpoint(dir, tokDir string, rs RunState, rows []records.Update) error {
	c := d.Comm
	n := c.Size()
	var tmp string
	var msg string
	if c.Rank() == 0 {
		var err error
		if tmp, err = fileio.TempDirBeside(dir); err != nil {
			msg = "!" + err.Error()
		} else {
			defer fileio.RemoveTempDir(tmp)
			if err := os.Mkdir(filepath.Join(tmp, "shards"), 0o755); err != nil {
				msg = "!" + err.Error()
			} else {
				msg = tmp
			}
		}
	}
	parts, err := c.Exchange([]byte(msg))
	if err != nil {
		return err
	}
	if s := string(parts[0]); strings.HasPrefix(s, "!") {
		return fmt.Errorf("rank 0: %s", s[1:])
	} else {
		tmp = s
	}
	shapes := map[string][]int{}
	for _, name := range d.names {
		shapes[name] = d.T.Model.ParamShape(name)
	}
	mine := filepath.Join(tmp, "shards", OptimizerShardFile(c.Rank(), n))
	if err := d.agree(WriteOptimizer(mine, d.T.Opt.State(), rs, shapes)); err != nil {
		return err
	}
	var saveErr error
	if c.Rank() == 0 {
		saveErr = saveBuilt(dir, tmp, d.T.Model, tokDir, rows, func(built string, _ map[string][]int) error {
			files := make([]string, n)
			for r := range files {
				files[r] = OptimizerShardFile(r, n)
				if err := os.Rename(filepath.Join(tmp, "shards", files[r]), filepath.Join(built, files[r])); err != nil {
					return err
				}
			}
			meta, err := rs.meta()
			if err != nil {
				return err
			}
			list, _ := json.Marshal(files)
			meta[metaShards], meta[metaShardFiles] = strconv.Itoa(n), string(list)
			return safetensors.WriteFile(filepath.Join(built, OptimizerFile), nil, meta)
		})
	}
	return d.agree(saveErr)
}

// agree tells every rank whether every rank's err was nil; the first
// failure is every rank's error.
func (d *DataParallel) agree(err error) error {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	parts, xerr := d.Comm.Exchange([]byte(msg))
	if xerr != nil {
		return xerr
	}
	for r, p := range parts {
		if len(p) > 0 {
			if r == d.Comm.Rank() {
				return err
			}
			return fmt.Errorf("rank %d: %s", r, p)
		}
	}
	return nil
}
