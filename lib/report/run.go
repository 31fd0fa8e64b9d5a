package report

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mempo/mempo/lib/cli"
	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/records"
)

// Config is one mempo-score invocation.
type Config struct {
	Rollouts  []string // rollouts files (Parquet or JSONL; "-" is stdin)
	Labels    []string // run labels, one per rollouts file; empty: each file's name stem
	Metrics   []string // update metrics files; paired with the labels when there are as many as rollouts files, else labelled by their own stem
	Out       string   // scores file (Parquet or JSONL)
	ReportDir string   // when set: table.md and PNG plots go here
	Options
}

// Stem is a file's base name without its extension(s) .parquet/.jsonl/.json;
// "-" is "stdin".
func Stem(path string) string {
	if path == "-" {
		return "stdin"
	}
	base := filepath.Base(path)
	for _, ext := range []string{".parquet", ".jsonl", ".ndjson", ".json"} {
		if strings.HasSuffix(strings.ToLower(base), ext) && len(base) > len(ext) {
			return base[:len(base)-len(ext)]
		}
	}
	return base
}

// Labels resolves the run label of every rollouts file: the given labels, or
// each file's name stem. Two files may share an explicit label (shards of one
// run, scored together) but not a defaulted one.
func Labels(files, labels []string) ([]string, error) {
	if len(labels) > 0 {
		if len(labels) != len(files) {
			return nil, fmt.Errorf("got %d --label values for %d rollouts files (give one per file, in order)", len(labels), len(files))
		}
		for i, l := range labels {
			if strings.TrimSpace(l) == "" {
				return nil, fmt.Errorf("--label %d is empty", i+1)
			}
		}
		return labels, nil
	}
	out := make([]string, len(files))
	seen := map[string]string{}
	for i, f := range files {
		out[i] = Stem(f)
		if prev, ok := seen[out[i]]; ok {
			return nil, fmt.Errorf("%s and %s both default to the run label %q; name the runs with --label", prev, f, out[i])
		}
		seen[out[i]] = f
	}
	return out, nil
}

// Run scores the rollouts, writes the scores file, prints the markdown table
// on stdout and, with a report directory, writes table.md and the plots. The
// paths of the report files written are returned.
func Run(cfg Config, stdout io.Writer) ([]string, error) {
	if len(cfg.Rollouts) == 0 {
		return nil, fmt.Errorf("%w (repeatable; or rollouts files as arguments)", cli.MissingFlags("--rollouts"))
	}
	if cfg.Out == "" {
		return nil, cli.MissingFlags("--out")
	}
	if _, err := fileio.Format(cfg.Out); err != nil {
		return nil, err
	}
	labels, err := Labels(cfg.Rollouts, cfg.Labels)
	if err != nil {
		return nil, err
	}
	acc := NewAccumulator(cfg.Options)
	prog := cli.NewProgress()
	total := 0
	for i, path := range cfg.Rollouts {
		n := 0
		err := records.Each(path, func(_ int, r *records.Rollout) error {
			acc.Add(labels[i], r)
			n++
			total++
			prog.Printf("%s: %d trajectories", path, n)
			return nil
		})
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("%s: no trajectories", path)
		}
	}
	prog.Done("scored %d trajectories from %d files", total, len(cfg.Rollouts))

	var updates []RunUpdates
	for i, path := range cfg.Metrics {
		label := Stem(path)
		if len(cfg.Metrics) == len(cfg.Rollouts) {
			label = labels[i]
		}
		rows, err := records.ReadFile[records.Update](path)
		if err != nil {
			return nil, err
		}
		if len(rows) == 0 {
			return nil, fmt.Errorf("%s: no update rows", path)
		}
		updates = append(updates, RunUpdates{Run: label, Updates: rows})
	}

	// Every output is written aside first and committed together at the
	// end: a report that cannot be written leaves --out as it was.
	scores := acc.Scores()
	table := Markdown(scores, acc.Runs())
	var stage string
	if cfg.ReportDir != "" {
		if err := os.MkdirAll(cfg.ReportDir, 0o755); err != nil {
			return nil, fmt.Errorf("--report %s: %w", cfg.ReportDir, err)
		}
		var err error
		if stage, err = os.MkdirTemp(cfg.ReportDir, ".report-*"); err != nil {
			return nil, fmt.Errorf("--report %s: %w", cfg.ReportDir, err)
		}
		defer os.RemoveAll(stage)
	}
	out, err := records.Create[records.Score](cfg.Out)
	if err != nil {
		return nil, err
	}
	defer out.Abort()
	if err := out.Write(scores...); err != nil {
		return nil, err
	}
	var staged []string
	if stage != "" {
		staged = []string{filepath.Join(stage, "table.md")}
		if err := os.WriteFile(staged[0], []byte(table), 0o644); err != nil {
			return nil, err
		}
		ps, err := KPlots(stage, scores, acc.Runs())
		if err != nil {
			return nil, err
		}
		staged = append(staged, ps...)
		if len(updates) > 0 {
			ps, err = UpdatePlots(stage, updates)
			if err != nil {
				return nil, err
			}
			staged = append(staged, ps...)
		}
	}
	var written []string
	for _, p := range staged {
		dst := filepath.Join(cfg.ReportDir, filepath.Base(p))
		if err := os.Rename(p, dst); err != nil {
			return written, fmt.Errorf("%s: %w", dst, err)
		}
		written = append(written, dst)
	}
	if cfg.ReportDir != "" {
		ps, err := WriteIndex(cfg.ReportDir, written)
		written = append(written, ps...)
		if err != nil {
			return written, err
		}
	}
	if err := out.Commit(); err != nil {
		return written, err
	}
	if _, err := io.WriteString(stdout, table); err != nil {
		return written, err
	}
	if cfg.ReportDir == "" {
		return nil, nil
	}
	return written, nil
}
