package report

import (
	"math"
	"testing"

	"github.com/mempo/mempo/lib/records"
)

// GRPO never computes the memory reward: it is named as not computed, not
// drawn as a line at 0; its task reward is drawn.
func TestUpdateFiguresNotComputed(t *testing.T) {
	rm := 0.3
	runs := []RunUpdates{
		{Run: "mempo", Updates: []records.Update{{Step: 1, RewardTaskMean: 0.5, RewardMemMean: &rm}, {Step: 2, RewardTaskMean: 0.6, RewardMemMean: &rm}}},
		{Run: "grpo", Updates: []records.Update{{Step: 1, RewardTaskMean: 0.4}, {Step: 2, RewardTaskMean: 0.7}}},
	}
	figs := updateFigures(runs)
	byFile := map[string]figure{}
	for _, f := range figs {
		byFile[f.file] = f
	}
	mem := byFile["memory_reward.png"]
	if len(mem.series) != 1 || mem.series[0].name != "mempo" || len(mem.notComputed) != 1 || mem.notComputed[0] != "grpo" {
		t.Errorf("memory reward figure: series %v, not computed %v", mem.series, mem.notComputed)
	}
	if rw := byFile["reward.png"]; len(rw.series) != 2 || len(rw.notComputed) != 0 || rw.categorical() {
		t.Errorf("reward figure %+v", rw)
	}
}

// One point per run at one shared x is drawn per run, not as lines; equal
// runs are shifted apart; a count axis gets whole-number ticks only.
func TestFigureLayoutRules(t *testing.T) {
	one := figure{series: []series{{"a", []point{{x: 2, y: 1}}}, {"b", []point{{x: 2, y: 1}}}}}
	if !one.categorical() {
		t.Error("one point per run at k = 2 should be categorical")
	}
	two := figure{series: []series{{"a", []point{{x: 2, y: 1}, {x: 4, y: 1}}}, {"b", []point{{x: 2, y: 1}, {x: 4, y: 1}}}, {"c", []point{{x: 8, y: 1}}}}}
	if two.categorical() {
		t.Error("several k is a line plot")
	}
	if d := two.dodge(); !(d > 0 && 2*d < 2) {
		t.Errorf("dodge %v for three runs over k = 2, 4, 8", d)
	}
	for _, c := range []struct {
		values []float64
		lo, hi float64
	}{{[]float64{2, 4, 8}, 1.7, 8.3}, {nil, 0.9, 2.1}, {nil, -3, 301}, {nil, 0.5, 17.5}} {
		ticks := intTicks{c.values}.Ticks(c.lo, c.hi)
		if len(ticks) < 2 || len(ticks) > 12 {
			t.Errorf("%v over [%v, %v]: %d ticks", c.values, c.lo, c.hi, len(ticks))
		}
		for _, tk := range ticks {
			if tk.Value != math.Trunc(tk.Value) || tk.Value < c.lo || tk.Value > c.hi {
				t.Errorf("%v over [%v, %v]: tick %v", c.values, c.lo, c.hi, tk.Value)
			}
		}
	}
	eb := errBars{{x: 1, y: 5, lo: 3, hi: 9}}
	if lo, hi := eb.YError(0); lo != 2 || hi != 4 {
		t.Errorf("error bar distances %v %v", lo, hi)
	}
}
