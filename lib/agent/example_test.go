package agent_test

import (
	"fmt"
	"strings"

	"github.com/mempo/mempo/lib/agent"
)

// byteTok is one id per byte, with <|im_start|> and <|im_end|> as 256 and
// 257: enough to run the protocol without a real tokenizer.
type byteTok struct{}

func (byteTok) Encode(s string) []int {
	var ids []int
	for len(s) > 0 {
		switch {
		case strings.HasPrefix(s, "<|im_start|>"):
			ids, s = append(ids, 256), s[len("<|im_start|>"):]
		case strings.HasPrefix(s, "<|im_end|>"):
			ids, s = append(ids, 257), s[len("<|im_end|>"):]
		default:
			ids, s = append(ids, int(s[0])), s[1:]
		}
	}
	return ids
}

func (byteTok) Decode(ids []int) string {
	var b strings.Builder
	for _, id := range ids {
		switch id {
		case 256:
			b.WriteString("<|im_start|>")
		case 257:
			b.WriteString("<|im_end|>")
		default:
			b.WriteByte(byte(id))
		}
	}
	return b.String()
}

// The loop a rollout engine runs for one trajectory: generation and
// retrieval are the engine's; here they are scripted.
func Example() {
	tok := byteTok{}
	ag, err := agent.New(agent.DefaultConfig(), tok)
	if err != nil {
		panic(err)
	}
	script := []string{
		"<mem>nothing yet</mem><think>look it up</think><search>Eiffel Tower city</search>",
		"<mem>the tower is in Paris</mem><think>done</think><answer>Paris</answer>",
	}
	tr := ag.NewTrajectory([]string{"In which city is the Eiffel Tower?"})
	for i := 0; !tr.Done(); i++ {
		ctx := tr.Context() // feed to the model; sample until a stop string
		_ = ctx
		out := tok.Encode(script[i]) // the sampled ids, kept as they are
		res, err := tr.Step(out, nil)
		if err != nil {
			panic(err)
		}
		if res.NeedSearch {
			docs := []agent.Doc{{ID: "7", Contents: "\"Eiffel Tower\"\nThe Eiffel Tower is in Paris."}}
			tr.Observe(docs)
		}
	}
	s := tr.Steps[1]
	fmt.Println(tr.Answers, tr.FormatOK, tr.Failure == agent.FailNone, tr.Turns)
	fmt.Printf("%q\n", tok.Decode(s.OutputIDs[s.MemStart:s.MemEnd]))
	fmt.Printf("%q\n", tr.Steps[0].ObsText)
	// Memory reward inputs for step 2: teacher-force both, average the
	// log-probs over the gold range of each.
	seqs, _ := tr.MemorySequences(1, [][]string{{"Paris", "Paris, France"}})
	fmt.Printf("%q\n", tok.Decode(seqs.Mem[seqs.MemGoldStart:seqs.MemGoldEnd]))
	// Output:
	// [Paris] true true 2
	// "<mem>the tower is in Paris</mem>"
	// "<information>[Turns left: 15]\nDoc 1(Title: Eiffel Tower) The Eiffel Tower is in Paris.</information>"
	// "Paris"
}
