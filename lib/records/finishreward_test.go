package records

import "testing"

// R^T of each kind for one right and one wrong objective, with and without
// a valid format.
func TestFinishReward(t *testing.T) {
	for _, c := range []struct {
		kind   string
		format bool
		want   float64
	}{
		{"", true, 0}, {"exact", true, 0}, {"em", true, 0.5}, {"f1", true, 0.5},
		{"em", false, 0}, {"f1", false, 0},
	} {
		r := Rollout{TaskID: "t", K: 2, Golds: [][]string{{"Paris"}, {"Berlin"}}, FormatOK: c.format, Answer: "Paris; Rome"}
		r.FinishReward(c.kind)
		if r.RewardTask != c.want {
			t.Errorf("kind %q format %v: R^T %v, want %v", c.kind, c.format, r.RewardTask, c.want)
		}
	}
	r := Rollout{TaskID: "t", K: 1, Golds: [][]string{{"Paris"}}, FormatOK: true, Answer: "Paris"}
	for _, kind := range TaskRewards {
		if r.FinishReward(kind); r.RewardTask != 1 {
			t.Errorf("kind %q: a right answer scores %v", kind, r.RewardTask)
		}
	}
}
