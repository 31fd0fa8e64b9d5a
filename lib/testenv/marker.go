package testenv

import (
	"fmt"
	"regexp"
	"strconv"
)

// Scripted policies (lib/rollout's and mempo-rollout's tests) open every
// memory they write with a marker of the sample and the turn, so that a
// later turn, whose request has N = 1 and no sample of its own, knows whose
// it is.

// memMarker matches MarkedMemory's opening.
var memMarker = regexp.MustCompile(`<mem>S(\d+)T(\d+) `)

// MarkedMemory is a <mem> block holding text, opened with the marker of
// sample and turn.
func MarkedMemory(sample, turn int, text string) string {
	return fmt.Sprintf("<mem>S%dT%d %s</mem>", sample, turn, text)
}

// MarkedTurn is the sample and turn a scripted step is for: from the last
// marker in the prompt (a later turn: the marker of the step before it,
// turn + 1), or the request's sample and turn 0.
func MarkedTurn(prompt string, sample int) (int, int) {
	turn := 0
	if ms := memMarker.FindAllStringSubmatch(prompt, -1); len(ms) > 0 {
		last := ms[len(ms)-1]
		sample, _ = strconv.Atoi(last[1])
		turn, _ = strconv.Atoi(last[2])
		turn++
	}
	return sample, turn
}
