package rollout

import (
	"reflect"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/retrieval"
)

// A random-weight model under ForceSearchTurns searches on its forced
// turns: valid search steps whose memory is the sampled text, retrieval and
// memory rewards run; the rows are the same whether the searches overlap
// the memory rewards or not.
func TestForcedSearchRandomModel(t *testing.T) {
	index, all := hotpot(t)
	ts := all[2:6]
	tok := smallTok(t)
	m := tinyModel(t, tok)
	ag := newAgent(t, tok, func(c *agent.Config) {
		c.MaxTurns = 3
		c.MaxStepTokens = 6
		c.ObsMaxTokens = 90
		c.TaskPrompt = shortPrompt
	})
	local, err := retrieval.NewLocal(index)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	var got [2][]records.Rollout
	for i, sync := range []bool{false, true} {
		srch := &recordingSearcher{Searcher: local}
		e := &Engine{Agent: ag, Policy: m, Searcher: srch, Opts: Options{
			GroupSize: 2, Batch: 4, Decode: tok.Decode, Encode: tok.Encode,
			Sampling: model.SampleParams{Temperature: 1, TopP: 1}, Seed: 5, MemoryReward: true,
			ForceSearchTurns: 2, SyncRetrieval: sync,
		}}
		rows, st := run(t, e, jobsOf(ts))
		forcedN := map[int]int{}
		sortRows(rows)
		got[i] = rows
		if st.SearchCalls != srch.calls || st.SearchCalls == 0 || st.Searches < len(rows) {
			t.Fatalf("sync=%v: %d search calls (%d seen), %d searches for %d rows", sync, st.SearchCalls, srch.calls, st.Searches, len(rows))
		}
		if g, s, r, h := st.Shares(); g <= 0 || r <= 0 || g+s+r+h < 0.999 || g+s+r+h > 1.001 {
			t.Errorf("sync=%v: shares %v %v %v %v", sync, g, s, r, h)
		}
		for _, q := range srch.queries[0] {
			if !strings.HasPrefix(q, "Which") && !strings.HasPrefix(q, "What") && !strings.Contains(q, " ") {
				t.Errorf("query %q does not start with a question", q)
			}
		}
		for _, r := range rows {
			n := 1 + int(mix64(5^0xf0ced, uint64(r.Group))%2) // forced steps of the task
			forcedN[n]++
			if len(r.Steps) < n {
				t.Fatalf("task %s sample %d: %d steps, %d forced", r.TaskID, r.Sample, len(r.Steps), n)
			}
			for _, s := range r.Steps[:n] {
				if s.Action != "search" || len(s.DocIDs) == 0 || s.RMem == nil {
					t.Errorf("task %s sample %d step %d: action %q, %d docs, r_mem %v", r.TaskID, r.Sample, s.Index, s.Action, len(s.DocIDs), s.RMem)
				}
				if len(s.Logprobs) != len(s.OutputIDs) {
					t.Errorf("step %d: %d log-probs for %d ids", s.Index, len(s.Logprobs), len(s.OutputIDs))
				}
			}
		}
		if len(forcedN) != 2 {
			t.Errorf("forced steps per task %v: want tasks with 1 and with 2", forcedN)
		}
	}
	for i := range got[0] {
		if got[0][i].Group != got[1][i].Group || got[0][i].Sample != got[1][i].Sample {
			t.Fatal("rows of different trajectories")
		}
		got[0][i].WallS, got[1][i].WallS = 0, 0
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Error("rows differ between overlapped and synchronous retrieval")
	}
}
