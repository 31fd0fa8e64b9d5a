package world

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/retrieval"
	"github.com/mempo/mempo/lib/rollout"
	"github.com/mempo/mempo/lib/tasks"
)

// The lossy expert (DropRate) still answers every task right within the
// turn budget; a drop is a step whose memory, thought and query repeat the
// previous step's (the fact the previous search returned was not filed);
// every other step's memory holds one more lookup than the one before; and
// the drops are the same from run to run.
func TestLossyExpert(t *testing.T) {
	dir, index, tk := writeWorld(t, 3)
	tok := rollout.Tok{T: tk}
	srch, err := retrieval.NewLocal(index)
	if err != nil {
		t.Fatal(err)
	}
	defer srch.Close()
	ag, err := agent.New(agent.DefaultConfig(), tok)
	if err != nil {
		t.Fatal(err)
	}
	memOf := func(st records.Step) string { return tok.Decode(from32(st.OutputIDs[st.MemStart:st.MemEnd])) }
	run := func(rate float64, ts []tasks.Task) (rows []records.Rollout) {
		ex := &Expert{Agent: ag, Tok: tok, Searcher: srch, DropRate: rate, DropSeed: 9}
		for i, task := range ts {
			r, err := ex.Run(context.Background(), task, int64(i))
			if err != nil {
				t.Fatalf("rate %g, %s: %v", rate, task.TaskID, err)
			}
			if err := ag.CheckRecord(r.Questions, rollout.StepRecords(&r)); err != nil {
				t.Fatalf("rate %g, %s: %v", rate, task.TaskID, err)
			}
			if r.RewardTask != 1 || int(r.Turns) > ag.Config().MaxTurns {
				t.Fatalf("rate %g, %s: reward %g in %d turns", rate, task.TaskID, r.RewardTask, r.Turns)
			}
			checkCopies(t, tk, task.TaskID, r)
			rows = append(rows, r)
		}
		return rows
	}
	drops, steps := 0, 0
	for _, k := range []int{2, 8} {
		ts, err := tasks.ReadTasks(filepath.Join(dir, TestTasksFile(k)))
		if err != nil {
			t.Fatal(err)
		}
		perfect, lossy, again := run(0, ts), run(0.4, ts), run(0.4, ts)
		for i, r := range lossy {
			if r.Turns != again[i].Turns || r.Answer != again[i].Answer {
				t.Fatalf("%s: two runs of the lossy expert differ (%d and %d turns)", r.TaskID, r.Turns, again[i].Turns)
			}
			d := 0
			for si := 1; si < len(r.Steps)-1; si++ {
				if r.Steps[si].OutputText == r.Steps[si-1].OutputText {
					d++
					if memOf(r.Steps[si]) != memOf(r.Steps[si-1]) {
						t.Fatalf("%s step %d: a repeat with another memory", r.TaskID, si+1)
					}
				}
			}
			if int(r.Turns)-d != int(perfect[i].Turns) || r.Answer != perfect[i].Answer {
				t.Fatalf("%s: %d turns with %d repeats against the perfect expert's %d, answer %q against %q",
					r.TaskID, r.Turns, d, perfect[i].Turns, r.Answer, perfect[i].Answer)
			}
			drops += d
			steps += int(r.Turns)
		}
	}
	// 0.4 of the filing steps repeat while the budget allows: far from none
	// and from all of them.
	if f := float64(drops) / float64(steps); f < 0.1 || f > 0.5 {
		t.Fatalf("%d repeats in %d steps at drop rate 0.4", drops, steps)
	}
}
