package rl

import (
	"fmt"
	"math"
	"strings"
)

// logRatioClamp bounds logp − old_logp before exp, as verl does (Δ clamp).
const logRatioClamp = 20

// PPOTerm is the clipped policy loss of one token and its derivative.
type PPOTerm struct {
	Loss         float64 // per-token loss (before aggregation)
	Grad         float64 // ∂Loss/∂logp
	NegLogRatio  float64 // −Δ, for the ppo_kl metric
	Clipped      bool    // L2 > L1 (pg_clipfrac)
	ClippedLower bool    // A < 0 and the dual clip bound is active (pg_clipfrac_lower)
}

// PPOToken is verl's vanilla policy loss for one token
// (reference-impls §4.3, core_algos.compute_policy_loss_vanilla):
//
//	Δ = clamp(logp − oldLogp, −20, 20), r = exp(Δ)
//	L1 = −A·r, L2 = −A·clamp(r, 1−clipLow, 1+clipHigh), Lclip = max(L1, L2)
//	A < 0 and clipC > 0: L = min(Lclip, −A·clipC)  (dual clip), else L = Lclip
//
// Grad is ∂L/∂logp, following autograd through the branch taken: zero where
// Δ is clamped, where the ratio is clipped, or where the dual clip bound
// (a constant) is the minimum. At exact ties (a measure-zero set) the
// branch is L1 resp. Lclip; torch splits such ties half and half.
// clipC = 0 turns the dual clip off; otherwise it must be > 1 (checked by
// LossConfig.Validate, not here).
func PPOToken(logp, oldLogp, adv, clipLow, clipHigh, clipC float64) PPOTerm {
	d := logp - oldLogp
	dd := 1.0 // dΔ/dlogp
	if d < -logRatioClamp {
		d, dd = -logRatioClamp, 0
	} else if d > logRatioClamp {
		d, dd = logRatioClamp, 0
	}
	r := math.Exp(d)
	dr := r * dd
	l1 := -adv * r
	g1 := -adv * dr
	lo, hi := 1-clipLow, 1+clipHigh
	rc, drc := r, dr
	if r < lo {
		rc, drc = lo, 0
	} else if r > hi {
		rc, drc = hi, 0
	}
	l2 := -adv * rc
	g2 := -adv * drc
	t := PPOTerm{NegLogRatio: -d}
	loss, grad := l1, g1
	if l2 > l1 {
		loss, grad = l2, g2
		t.Clipped = true
	}
	if adv < 0 && clipC > 0 {
		l3 := -adv * clipC
		if loss > l3 {
			loss, grad = l3, 0
			t.ClippedLower = true
		}
	}
	t.Loss, t.Grad = loss, grad
	return t
}

// KLType selects the KL(π‖π_ref) estimator (verl's kl_penalty).
type KLType int

const (
	// KLLowVar is k3 / "low_var_kl": k = clamp(ref − logp, −20, 20),
	// exp(k) − k − 1 clamped to [−10, 10]. The default.
	KLLowVar KLType = iota
	// KLK1 is "kl"/k1: logp − ref.
	KLK1
	// KLK2 is "mse"/k2: ½(logp − ref)².
	KLK2
)

// ParseKLType accepts verl's names: k1/kl, k2/mse, k3/low_var_kl.
func ParseKLType(s string) (KLType, error) {
	switch strings.ToLower(s) {
	case "k3", "low_var_kl":
		return KLLowVar, nil
	case "k1", "kl":
		return KLK1, nil
	case "k2", "mse":
		return KLK2, nil
	}
	return 0, fmt.Errorf("rl: unknown KL estimator %q (want k1, k2 or k3/low_var_kl)", s)
}

func (k KLType) String() string {
	switch k {
	case KLLowVar:
		return "low_var_kl"
	case KLK1:
		return "k1"
	case KLK2:
		return "k2"
	}
	return fmt.Sprintf("KLType(%d)", int(k))
}

// KLToken returns the per-token KL estimate between the policy (logp) and
// the reference (ref) and its derivative with respect to logp. The k3
// derivative is 1 − exp(k) where neither clamp is active and 0 where one is
// (autograd through torch.clamp).
func KLToken(typ KLType, logp, ref float64) (kl, grad float64) {
	switch typ {
	case KLK1:
		return logp - ref, 1
	case KLK2:
		d := logp - ref
		return 0.5 * d * d, d
	default: // KLLowVar
		k := ref - logp
		dk := -1.0
		if k < -logRatioClamp {
			k, dk = -logRatioClamp, 0
		} else if k > logRatioClamp {
			k, dk = logRatioClamp, 0
		}
		e := math.Exp(k)
		kld := e - k - 1
		g := (e - 1) * dk
		// exp(k) − k − 1 ≥ 0, so only the upper bound can bind; the
		// lower one is kept to mirror verl.
		if kld > 10 {
			kld, g = 10, 0
		} else if kld < -10 {
			kld, g = -10, 0
		}
		return kld, g
	}
}
