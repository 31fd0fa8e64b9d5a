package optim

import (
	"fmt"
	"math"
)

// ScheduleKind names a learning-rate schedule.
type ScheduleKind int

const (
	// Constant: linear warmup (if WarmupSteps > 0), then PeakLR
	// (HF get_constant_schedule_with_warmup).
	Constant ScheduleKind = iota
	// WarmupCosine: linear warmup, then cosine decay from PeakLR to
	// MinRatio·PeakLR at TotalSteps (HF
	// get_cosine_with_min_lr_schedule_with_warmup, half a cycle), held
	// there after TotalSteps.
	WarmupCosine
)

// Schedule gives the learning rate of each optimizer step.
//
// Step convention (HF LambdaLR as stepped by the Trainer): LR(step) is the
// rate of the update taken when `step` updates have already been done, so
// the first update uses LR(0). With warmup, LR(0) = 0 (as in HF: the first
// update only fills the moments), LR(WarmupSteps) = PeakLR, and for the
// cosine LR(TotalSteps) = MinRatio·PeakLR.
type Schedule struct {
	Kind        ScheduleKind
	PeakLR      float64
	WarmupSteps int64
	TotalSteps  int64   // WarmupCosine: the step at which the decay ends
	MinRatio    float64 // WarmupCosine: final rate as a fraction of PeakLR
}

// Validate checks the schedule's fields.
func (s Schedule) Validate() error {
	if math.IsNaN(s.PeakLR) || math.IsInf(s.PeakLR, 0) || s.PeakLR < 0 {
		return fmt.Errorf("optim: peak learning rate must be finite and ≥ 0, got %v", s.PeakLR)
	}
	if s.WarmupSteps < 0 {
		return fmt.Errorf("optim: warmup steps %d < 0", s.WarmupSteps)
	}
	switch s.Kind {
	case Constant:
	case WarmupCosine:
		if s.TotalSteps <= s.WarmupSteps {
			return fmt.Errorf("optim: cosine schedule needs total steps (%d) > warmup steps (%d)", s.TotalSteps, s.WarmupSteps)
		}
		if !(s.MinRatio >= 0 && s.MinRatio <= 1) {
			return fmt.Errorf("optim: cosine min ratio must lie in [0, 1], got %v", s.MinRatio)
		}
	default:
		return fmt.Errorf("optim: unknown schedule kind %d", int(s.Kind))
	}
	return nil
}

// LR returns the learning rate of the update taken after `step` updates.
func (s Schedule) LR(step int64) float64 {
	if step < 0 {
		step = 0
	}
	if step < s.WarmupSteps {
		return s.PeakLR * float64(step) / float64(max(1, s.WarmupSteps))
	}
	if s.Kind != WarmupCosine {
		return s.PeakLR
	}
	progress := float64(step-s.WarmupSteps) / float64(max(1, s.TotalSteps-s.WarmupSteps))
	progress = min(progress, 1)
	f := 0.5 * (1 + math.Cos(math.Pi*progress))
	return s.PeakLR * (s.MinRatio + (1-s.MinRatio)*f)
}
