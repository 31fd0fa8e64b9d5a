package world

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/rollout"
	"github.com/mempo/mempo/lib/tasks"
)

// The lossy expert (DropRate) still answers every task right within the
// turn budget; a drop is a step whose memory, thought and query repeat the
// previous step's (the fact the previous search returned was not filed);
// every other step's memory holds one more lookup than the one before; and
// the drops are the same from run to run.
func TestLossyExpert(t *testing.T) {
	dir, tok, srch := expertWorld(t, 3)
	ag, err := agent.New(agent.DefaultConfig(), tok)
	if err != nil {
		t.Fatal(err)
	}
	memOf := func(st records.Step) string { return tok.Decode(records.IDs(st.OutputIDs[st.MemStart:st.MemEnd])) }
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
			checkCopies(t, tok.T, task.TaskID, r)
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

// AnswerRow: about AnswerRate of the demonstrations give one row, the same
// ones from run to run; its context is exactly the memory-reward sequence
// of one of the demonstration's steps up to the gold, under the agent's
// layout, and its output the gold and "</answer>"; the memory is never a
// target.
func TestAnswerRow(t *testing.T) {
	dir, tok, srch := expertWorld(t, 3)
	var ts []tasks.Task
	for _, k := range []int{2, 4, 8} {
		kt, err := tasks.ReadTasks(filepath.Join(dir, TestTasksFile(k)))
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, kt...)
	}
	for _, layout := range []agent.ScoreLayout{agent.ScoreInTurn, agent.ScoreNextStep} {
		cfg := agent.DefaultConfig()
		cfg.ScoreGoldNumbered, cfg.ScoreLeadIn, cfg.ScoreLayout = true, "<think>all {k} answers are known</think><answer>", layout
		ag, err := agent.New(cfg, tok)
		if err != nil {
			t.Fatal(err)
		}
		ex := &Expert{Agent: ag, Tok: tok, Searcher: srch, DropSeed: 4, AnswerRate: 0.5}
		rows, steps := 0, map[int]bool{}
		for i, task := range ts {
			r, err := ex.Run(context.Background(), task, int64(i))
			if err != nil {
				t.Fatal(err)
			}
			ar, ok, err := ex.AnswerRow(r)
			if err != nil {
				t.Fatal(err)
			}
			if again, ok2, _ := ex.AnswerRow(r); ok2 != ok || (ok && !slices.Equal(again.Steps[0].ContextIDs, ar.Steps[0].ContextIDs)) {
				t.Fatalf("%s: two draws differ", task.TaskID)
			}
			if !ok {
				continue
			}
			rows++
			if len(ar.Steps) != 1 || ar.Turns != 1 || ar.TaskID != r.TaskID {
				t.Fatalf("%s: %d steps, %d turns, task %s", task.TaskID, len(ar.Steps), ar.Turns, ar.TaskID)
			}
			st := ar.Steps[0]
			var parts []string
			for i, g := range r.Golds {
				parts = append(parts, fmt.Sprintf("[%d] %s", i+1, g[0]))
			}
			gold := strings.Join(parts, "; ")
			if got := tok.Decode(records.IDs(st.OutputIDs)); got != gold+"</answer>" || st.MemStart != -1 ||
				int(st.OutputTokens) != len(st.OutputIDs) || int(st.ContextTokens) != len(st.ContextIDs) {
				t.Fatalf("%s: output %q, mem span %d, counts %d/%d", task.TaskID, got, st.MemStart, st.ContextTokens, st.OutputTokens)
			}
			// Which step: the one whose memory sequence the context is.
			found := false
			for si, ds := range r.Steps {
				var hist []agent.Turn
				for _, p := range r.Steps[:si] {
					hist = append(hist, agent.Turn{Output: records.IDs(p.OutputIDs), Obs: records.IDs(p.ObsIDs)})
				}
				hist = append(hist, agent.Turn{Output: records.IDs(ds.OutputIDs)})
				seq, err := ag.MemorySequences(ag.PromptIDs(r.Questions), hist, si, int(ds.MemStart), int(ds.MemEnd), gold, len(r.Golds))
				if err != nil {
					t.Fatal(err)
				}
				if slices.Equal(records.IDs(st.ContextIDs), seq.Mem[:seq.MemGoldStart]) {
					found, steps[si] = true, true
					break
				}
			}
			if !found {
				t.Fatalf("%s: the row's context is no step's memory sequence", task.TaskID)
			}
			// The hand-built layout of the context: the memory opens the
			// answering turn, or is a closed turn before it.
			prompt, asst := ag.PromptIDs(r.Questions), tok.Encode("<|im_start|>assistant\n")
			ctx := tok.Decode(records.IDs(st.ContextIDs[len(prompt):]))
			lead := fmt.Sprintf("<think>all %d answers are known</think><answer>$", len(r.Golds))
			want := `^<\|im_start\|>assistant\n<mem>[^<]*</mem>` + lead
			if layout == agent.ScoreNextStep {
				want = `^<\|im_start\|>assistant\n<mem>[^<]*</mem><\|im_end\|>\n<\|im_start\|>assistant\n` + lead
			}
			if !slices.Equal(records.IDs(st.ContextIDs[:len(prompt)+len(asst)]), slices.Concat(prompt, asst)) || !regexp.MustCompile(want).MatchString(ctx) {
				t.Fatalf("%s, layout %v: context after the prompt %q", task.TaskID, layout, ctx)
			}
		}
		if rows < len(ts)/4 || rows > 3*len(ts)/4 || len(steps) < 2 {
			t.Fatalf("layout %v: %d rows of %d demonstrations at rate 0.5, from %d distinct step indices", layout, rows, len(ts), len(steps))
		}
	}
}

// AnswerRow under AnswerSubsetMemory: the row's context is the scoring
// sequence of a memory that holds some of the final memory's entries, in
// order, and nothing else; each objective number is kept in some rows and
// left out of others (the point of the mode), and the draw repeats.
func TestAnswerRowSubset(t *testing.T) {
	dir, tok, srch := expertWorld(t, 3)
	var ts []tasks.Task
	for _, k := range []int{4, 8} {
		kt, err := tasks.ReadTasks(filepath.Join(dir, TestTasksFile(k)))
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, kt...)
	}
	cfg := agent.DefaultConfig()
	cfg.ScoreGoldNumbered, cfg.ScoreLeadIn = true, "<think>all {k} answers are known</think><answer>"
	ag, err := agent.New(cfg, tok)
	if err != nil {
		t.Fatal(err)
	}
	ex := &Expert{Agent: ag, Tok: tok, Searcher: srch, DropSeed: 4, AnswerRate: 1, AnswerMemory: AnswerSubsetMemory}
	kept, left := map[int]int{}, map[int]int{}
	memRE := regexp.MustCompile(`<mem>([^<]*)</mem>`)
	for i, task := range ts {
		r, err := ex.Run(context.Background(), task, int64(i))
		if err != nil {
			t.Fatal(err)
		}
		ar, ok, err := ex.AnswerRow(r)
		if err != nil || !ok {
			t.Fatalf("%s: row %v, %v at rate 1", task.TaskID, ok, err)
		}
		if again, _, _ := ex.AnswerRow(r); !slices.Equal(again.Steps[0].ContextIDs, ar.Steps[0].ContextIDs) {
			t.Fatalf("%s: two draws differ", task.TaskID)
		}
		last := r.Steps[len(r.Steps)-1]
		final := strings.Split(memRE.FindStringSubmatch(tok.Decode(records.IDs(last.OutputIDs)))[1], "; ")
		ms := memRE.FindAllStringSubmatch(tok.Decode(records.IDs(ar.Steps[0].ContextIDs)), -1) // the prompt's instructions show one too
		got := strings.Split(ms[len(ms)-1][1], "; ")
		if len(final) != len(r.Golds) {
			t.Fatalf("%s: final memory %q for %d objectives", task.TaskID, final, len(r.Golds))
		}
		// got must be final with entries left out, in order (or NoMemory).
		j := 0
		for _, e := range got {
			if e == NoMemory && len(got) == 1 {
				break
			}
			for j < len(final) && final[j] != e {
				left[j+1]++
				j++
			}
			if j == len(final) {
				t.Fatalf("%s: memory %q is not a subset of %q in order", task.TaskID, got, final)
			}
			kept[j+1]++
			j++
		}
		for ; j < len(final); j++ {
			left[j+1]++
		}
		// The context is the scoring sequence of that memory.
		mem := tok.Encode("<mem>" + strings.Join(got, "; ") + "</mem>")
		var gold []string
		for i, g := range r.Golds {
			gold = append(gold, fmt.Sprintf("[%d] %s", i+1, g[0]))
		}
		seq, err := ag.MemorySequences(ag.PromptIDs(r.Questions), []agent.Turn{{Output: mem}}, 0, 0, len(mem), strings.Join(gold, "; "), len(r.Golds))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(records.IDs(ar.Steps[0].ContextIDs), seq.Mem[:seq.MemGoldStart]) {
			t.Fatalf("%s: context is not the scoring sequence of memory %q", task.TaskID, got)
		}
	}
	for j := 1; j <= 8; j++ {
		if kept[j] == 0 || left[j] == 0 {
			t.Fatalf("objective %d kept in %d rows, left out of %d", j, kept[j], left[j])
		}
	}
}

// Slots: every memory of a task lists its k objectives in order, the ones
// the default layout has filed at that step as it files them and "[j] ?"
// for the rest; the steps, searches and answers are the default layout's
// (the lossy expert's drops included); a subset answer row keeps k entries.
func TestExpertSlots(t *testing.T) {
	dir, tok, srch := expertWorld(t, 3)
	ts, err := tasks.ReadTasks(filepath.Join(dir, TestTasksFile(4)))
	if err != nil {
		t.Fatal(err)
	}
	cfg := agent.DefaultConfig()
	cfg.ScoreGoldNumbered, cfg.ScoreLeadIn = true, "<think>all {k} answers are known</think><answer>"
	ag, err := agent.New(cfg, tok)
	if err != nil {
		t.Fatal(err)
	}
	memRE := regexp.MustCompile(`<mem>([^<]*)</mem>`)
	mems := func(r records.Rollout) []string {
		var out []string
		for _, st := range r.Steps {
			ms := memRE.FindAllStringSubmatch(tok.Decode(records.IDs(st.OutputIDs)), -1)
			out = append(out, ms[len(ms)-1][1])
		}
		return out
	}
	plain := &Expert{Agent: ag, Tok: tok, Searcher: srch, DropRate: 0.3, DropSeed: 4}
	slots := &Expert{Agent: ag, Tok: tok, Searcher: srch, DropRate: 0.3, DropSeed: 4, Slots: true,
		AnswerRate: 1, AnswerMemory: AnswerSubsetMemory}
	unknowns := 0
	for i, task := range ts {
		a, err := plain.Run(context.Background(), task, int64(i))
		if err != nil {
			t.Fatal(err)
		}
		b, err := slots.Run(context.Background(), task, int64(i))
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Steps) != len(b.Steps) || a.RewardTask != b.RewardTask {
			t.Fatalf("%s: %d steps (reward %v) against the default layout's %d (%v)", task.TaskID, len(b.Steps), b.RewardTask, len(a.Steps), a.RewardTask)
		}
		am, bm := mems(a), mems(b)
		for si := range am {
			if a.Steps[si].Query != b.Steps[si].Query || a.Steps[si].Action != b.Steps[si].Action {
				t.Fatalf("%s step %d: %s %q against %s %q", task.TaskID, si+1, b.Steps[si].Action, b.Steps[si].Query, a.Steps[si].Action, a.Steps[si].Query)
			}
			var filed []string
			if am[si] != NoMemory {
				filed = strings.Split(am[si], "; ")
			}
			want := slices.Clone(filed)
			for j := len(filed); j < len(task.Questions); j++ {
				want = append(want, fmt.Sprintf("[%d] ?", j+1))
				unknowns++
			}
			if bm[si] != strings.Join(want, "; ") {
				t.Fatalf("%s step %d: slot memory %q, want %q", task.TaskID, si+1, bm[si], strings.Join(want, "; "))
			}
		}
		ar, ok, err := slots.AnswerRow(b)
		if err != nil || !ok {
			t.Fatalf("%s: answer row %v, %v", task.TaskID, ok, err)
		}
		ms := memRE.FindAllStringSubmatch(tok.Decode(records.IDs(ar.Steps[0].ContextIDs)), -1)
		got := strings.Split(ms[len(ms)-1][1], "; ")
		final := strings.Split(bm[len(bm)-1], "; ")
		if len(got) != len(final) {
			t.Fatalf("%s: subset memory %q of %q", task.TaskID, got, final)
		}
		for j := range got {
			if got[j] != final[j] && got[j] != fmt.Sprintf("[%d] ?", j+1) {
				t.Fatalf("%s: subset memory %q of %q", task.TaskID, got, final)
			}
		}
	}
	if unknowns == 0 {
		t.Fatal("no memory had an unknown slot")
	}
}
