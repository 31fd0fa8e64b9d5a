package rollout

import (
	"strings"
	"time"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/tasks"
)

// Record turns a finished trajectory that was not sampled (a demonstration:
// the world's scripted expert, or a trajectory imported from text) into a
// rollouts row (docs/formats.md), filled the way the engine fills its rows:
// ids as stored, no log-probs, greedy sampling settings.
func Record(tr *agent.Trajectory, t tasks.Task, group int64, keep agent.Keep, policy string, wall time.Duration) records.Rollout {
	r := records.Rollout{
		TaskID: t.TaskID, DataSource: t.DataSource, K: int32(len(t.Questions)), Prompt: t.Prompt,
		Questions: append([]string(nil), t.Questions...), Golds: t.Golds,
		Group: group, Policy: policy, Keep: keep.String(), TopP: 1,
		Answer: tr.AnswerText, FormatOK: tr.FormatOK, WallS: max(wall.Seconds(), 1e-9),
	}
	if r.Prompt == "" {
		r.Prompt = strings.Join(t.Questions, "; ")
	}
	switch tr.Failure {
	case agent.FailMaxTurns:
		r.Failure = "no_answer"
	case agent.FailFormat:
		r.Failure = "bad_format"
	}
	for i, s := range tr.Steps {
		st := records.Step{
			Index: int32(i), ContextIDs: records.IDs32(s.ContextIDs), OutputIDs: records.IDs32(s.OutputIDs),
			MemStart: int32(s.MemStart), MemEnd: int32(s.MemEnd),
			Action: s.Action, Query: s.Query, DocIDs: s.DocIDs, Finish: "stop",
			ContextTokens: int32(s.ContextTokens), OutputTokens: int32(s.OutputTokens),
			ObsIDs: records.IDs32(s.ObsIDs), InfoText: s.ObsText, OutputText: s.Text,
		}
		if !s.Valid {
			st.Action = "invalid"
		}
		if st.DocIDs == nil {
			st.DocIDs = []string{}
		}
		r.Steps = append(r.Steps, st)
	}
	r.Finish()
	return r
}
