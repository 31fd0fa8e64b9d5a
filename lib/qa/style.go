package qa

import "fmt"

// Style names whose scoring scripts EM, sub-EM and F1 reproduce where the
// field's scripts differ. EM (normalized equality with some alias) and sub-EM
// (Search-R1's subem_check) are the same in both; F1 differs.
type Style int

const (
	// SearchR1 is the default: EM and sub-EM as Search-R1's qa_em.py
	// (em_check, subem_check), F1 as SQuAD v1.1's f1_score. Search-R1 itself
	// defines no F1; SQuAD v1.1's is the one its normalization comes from.
	SearchR1 Style = iota
	// HotpotQA is hotpot_evaluate_v1.py: F1 is 0 when either side normalizes
	// to yes, no or noanswer and the two differ.
	HotpotQA
)

// StyleNames lists the accepted names, the default first.
var StyleNames = []string{"search-r1", "hotpotqa"}

func (s Style) String() string {
	if s >= 0 && int(s) < len(StyleNames) {
		return StyleNames[s]
	}
	return fmt.Sprintf("Style(%d)", int(s))
}

// ParseStyle reads a style name; "" is the default.
func ParseStyle(name string) (Style, error) {
	switch name {
	case "", "search-r1":
		return SearchR1, nil
	case "hotpotqa":
		return HotpotQA, nil
	}
	return 0, fmt.Errorf("unknown metric style %q (want search-r1 or hotpotqa)", name)
}
