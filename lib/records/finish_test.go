package records

import (
	"reflect"
	"testing"
)

func TestFinish(t *testing.T) {
	r := Rollout{TaskID: "t", K: 2, Golds: [][]string{{"Paris"}, {"Berlin", "Berlin, Germany"}}, FormatOK: true,
		Steps:  []Step{{ContextTokens: 100, OutputTokens: 20}, {ContextTokens: 150, OutputTokens: 30}, {ContextTokens: 90, OutputTokens: 10}},
		Answer: " the paris ;Berlin Germany "}
	r.Finish()
	if !reflect.DeepEqual(r.Answers, []string{"the paris", "Berlin Germany"}) || !r.FormatOK || r.RewardTask != 1 ||
		!reflect.DeepEqual(r.EM, []float64{1, 1}) || r.Turns != 3 || r.TotalTokens != 400 || r.PeakTokens != 180 {
		t.Fatalf("%+v", r)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	r.Answer = "Paris; "
	r.Finish()
	if r.FormatOK || r.RewardTask != 0 || r.EM[0] != 1 || r.EM[1] != 0 {
		t.Fatalf("empty part: %+v", r)
	}
	r.FormatOK = true
	r.Answer = "Paris"
	r.Finish()
	if r.FormatOK || r.EM[0] != 0 || len(r.Answers) != 1 {
		t.Fatalf("one answer for two objectives: %+v", r)
	}
	r.FormatOK, r.Answer = true, ""
	r.Finish()
	if r.FormatOK || r.Answers == nil || len(r.Answers) != 0 || r.RewardTask != 0 {
		t.Fatalf("no answer: %+v", r)
	}
	r.FormatOK, r.Answer = false, "Paris; Berlin"
	r.Finish()
	if r.RewardTask != 0 || r.EM[1] != 1 {
		t.Fatalf("right answers with a bad format: %+v", r)
	}
}
