package main

import (
	"fmt"
	"sort"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/cmd/internal/flags"
	"github.com/mempo/mempo/lib/records"
)

// Sharded rollouts: `--shard i/n` runs the tasks whose index (in the tasks
// file, after --limit) is i modulo n, one process per GPU; each task keeps
// its index as its group, so its seeds, and with a batch-invariant policy
// its rows, are the unsharded run's. `mempo-rollout merge` puts the shards'
// files back into the unsharded order.

func init() {
	rolloutFlags = append(rolloutFlags, &ucli.StringFlag{Name: "shard", Usage: "i/n: run only the tasks whose index is i modulo n (merge the n outputs with mempo-rollout merge)"})
	subcommands = append(subcommands, mergeCommand)
}

// parseShard reads --shard; unset is shard 0 of 1.
func parseShard(c *ucli.Context) (int, int, error) {
	s := c.String("shard")
	if s == "" {
		return 0, 1, nil
	}
	return flags.ParseShard("shard", s)
}

func (a *rolloutArgs) inShard(task int) bool { return a.shards <= 1 || task%a.shards == a.shard }

var mergeCommand = &ucli.Command{
	Name:      "merge",
	Usage:     "merge the rollouts files of --shard i/n runs into the unsharded order (by task group, then sample)",
	ArgsUsage: "FILE...",
	Description: "Example:\n   mempo-rollout merge --out rollouts.parquet r0.parquet r1.parquet\n\n" +
		"Every task group must come from exactly one input file, and the groups must be 0..N−1 without a gap\n" +
		"(a missing shard is named). The output is written atomically.",
	Flags:  []ucli.Flag{&ucli.StringFlag{Name: "out", Usage: "merged rollouts file (.parquet or .jsonl)"}},
	Action: runMerge,
}

func runMerge(c *ucli.Context) error {
	if c.String("out") == "" {
		return fmt.Errorf("missing --out")
	}
	files := c.Args().Slice()
	if len(files) == 0 {
		return fmt.Errorf("merge: give the shards' rollouts files as arguments")
	}
	var rows []records.Rollout
	from := map[int64]string{} // group → the file it came from
	for _, f := range files {
		seen := map[int64]bool{}
		err := records.Each(f, func(row int, r *records.Rollout) error {
			if other, ok := from[r.Group]; ok && !seen[r.Group] {
				return fmt.Errorf("%s: row %d: task group %d is in %s too (the same shard given twice?)", f, row, r.Group, other)
			}
			seen[r.Group], from[r.Group] = true, f
			rows = append(rows, *r)
			return nil
		})
		if err != nil {
			return err
		}
		if len(seen) == 0 {
			return fmt.Errorf("%s: no rollouts in the file", f)
		}
	}
	for g := int64(0); g < int64(len(from)); g++ {
		if _, ok := from[g]; !ok {
			return fmt.Errorf("merge: task group %d is in none of the %d files (a shard is missing)", g, len(files))
		}
	}
	sort.SliceStable(rows, func(a, b int) bool {
		if rows[a].Group != rows[b].Group {
			return rows[a].Group < rows[b].Group
		}
		return rows[a].Sample < rows[b].Sample
	})
	if err := records.WriteFile(c.String("out"), rows); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "wrote %s: %d trajectories of %d task groups from %d files\n", c.String("out"), len(rows), len(from), len(files))
	return nil
}
