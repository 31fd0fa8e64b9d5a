package main

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Shards 0/3, 1/3, 2/3 merged equal the unsharded run row for row (the
// scripted policy draws from each (task, sample, turn) seed, so any change
// of seeds or order would show); merge names a missing or repeated shard.
func TestShardMergeEqualsUnsharded(t *testing.T) {
	index, tasksFile, modelDir, _ := roFixture(t)
	useScripted(0)
	defer func() { loadPolicy = realLoadPolicy }()
	dir := t.TempDir()
	args := func(out string, extra ...string) []string {
		return append([]string{"--model", modelDir, "--tasks", tasksFile, "--index", index, "--group", "2", "--batch", "4",
			"--seed", "9", "--out", out, "--max-turns", "3", "--limit", "7"}, extra...)
	}
	ref := filepath.Join(dir, "ref.parquet")
	if err := runRoot(args(ref)...); err != nil {
		t.Fatal(err)
	}
	var parts []string
	for i := 0; i < 3; i++ {
		p := filepath.Join(dir, "s"+string(rune('0'+i))+".jsonl")
		if err := runRoot(args(p, "--shard", string(rune('0'+i))+"/3")...); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	merged := filepath.Join(dir, "merged.parquet")
	if err := runRoot(append([]string{"merge", "--out", merged}, parts[2], parts[0], parts[1])...); err != nil {
		t.Fatal(err)
	}
	want, got := readRows(t, ref), readRows(t, merged)
	if len(want) != 14 || len(got) != len(want) {
		t.Fatalf("%d merged rows, %d unsharded (want 14)", len(got), len(want))
	}
	for i := range want {
		want[i].WallS, got[i].WallS = 0, 0 // the one field that is timing
		if !reflect.DeepEqual(want[i], got[i]) {
			t.Fatalf("row %d differs: task %s sample %d answer %q vs task %s sample %d answer %q", i,
				want[i].TaskID, want[i].Sample, want[i].Answer, got[i].TaskID, got[i].Sample, got[i].Answer)
		}
	}
	err := runRoot("merge", "--out", filepath.Join(dir, "x.parquet"), parts[0], parts[2])
	if err == nil || !strings.Contains(err.Error(), "task group 1 is in none of the 2 files") {
		t.Errorf("missing shard: %v", err)
	}
	err = runRoot("merge", "--out", filepath.Join(dir, "x.parquet"), parts[0], parts[0])
	if err == nil || !strings.Contains(err.Error(), "is in "+parts[0]+" too") {
		t.Errorf("repeated shard: %v", err)
	}
}
