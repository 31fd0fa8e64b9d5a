package retrieval

import (
	"reflect"
	"testing"
)

func TestPorterStem(t *testing.T) {
	// Pairs from Martin Porter's published vocabulary / output lists.
	cases := map[string]string{
		"caresses": "caress", "ponies": "poni", "ties": "ti", "caress": "caress", "cats": "cat",
		"feed": "feed", "agreed": "agre", "plastered": "plaster", "bled": "bled", "motoring": "motor",
		"sing": "sing", "conflated": "conflat", "troubled": "troubl", "sized": "size", "hopping": "hop",
		"tanned": "tan", "falling": "fall", "hissing": "hiss", "fizzed": "fizz", "failing": "fail",
		"filing": "file", "happy": "happi", "sky": "sky", "relational": "relat", "conditional": "condit",
		"rational": "ration", "valenci": "valenc", "hesitanci": "hesit", "digitizer": "digit",
		"conformabli": "conform", "radicalli": "radic", "differentli": "differ", "vileli": "vile",
		"analogousli": "analog", "vietnamization": "vietnam", "predication": "predic", "operator": "oper",
		"feudalism": "feudal", "decisiveness": "decis", "hopefulness": "hope", "callousness": "callous",
		"formaliti": "formal", "sensitiviti": "sensit", "sensibiliti": "sensibl", "triplicate": "triplic",
		"formative": "form", "formalize": "formal", "electriciti": "electr", "electrical": "electr",
		"hopeful": "hope", "goodness": "good", "revival": "reviv", "allowance": "allow", "inference": "infer",
		"airliner": "airlin", "gyroscopic": "gyroscop", "adjustable": "adjust", "defensible": "defens",
		"irritant": "irrit", "replacement": "replac", "adjustment": "adjust", "dependent": "depend",
		"adoption": "adopt", "homologou": "homolog", "communism": "commun", "activate": "activ",
		"angulariti": "angular", "homologous": "homolog", "effective": "effect", "bowdlerize": "bowdler",
		"probate": "probat", "rate": "rate", "cease": "ceas", "controll": "control", "roll": "roll",
		"generalization": "gener", "university": "univers", "running": "run", "connections": "connect",
		"is": "is", "as": "as", "café": "café", "1977": "1977",
	}
	for in, want := range cases {
		if got := PorterStem(in); got != want {
			t.Errorf("PorterStem(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAnalyze(t *testing.T) {
	text := "The Socialist-Revolutionary Party's leaders (1917) were in Россия, weren't they? É"
	got := Analyzer{}.Analyze(text, nil)
	want := []string{"the", "socialist", "revolutionary", "party", "leaders", "1917", "were", "in", "россия", "weren", "t", "they", "é"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("plain: %q\nwant   %q", got, want)
	}
	got = DefaultAnalyzer.Analyze(text, nil)
	want = []string{"socialist", "revolutionari", "parti", "leader", "1917", "were", "россия", "weren", "t", "é"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("default: %q\nwant     %q", got, want)
	}
	if got := (Analyzer{}).Analyze("Inna’s album", nil); !reflect.DeepEqual(got, []string{"inna", "album"}) {
		t.Fatalf("curly possessive: %q", got)
	}
}
