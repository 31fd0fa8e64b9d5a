package optim

import "fmt"

// ScheduleKinds are the text forms of the schedules, as mempo-update's
// --schedule flag takes them. (No String method: mempo-update fingerprints
// its configs with %+v, and one would change every fingerprint.)
var ScheduleKinds = map[string]ScheduleKind{"constant": Constant, "cosine": WarmupCosine}

// ParseScheduleKind accepts "constant" and "cosine" (linear warmup, then
// cosine decay).
func ParseScheduleKind(s string) (ScheduleKind, error) {
	if k, ok := ScheduleKinds[s]; ok {
		return k, nil
	}
	return 0, fmt.Errorf("--schedule %q: want constant or cosine", s)
}
