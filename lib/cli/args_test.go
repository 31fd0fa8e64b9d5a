package cli

import (
	"slices"
	"testing"

	ucli "github.com/urfave/cli/v2"
)

func TestFlagsAnywhere(t *testing.T) {
	app := &ucli.App{Name: "x",
		Flags:    []ucli.Flag{&ucli.StringFlag{Name: "out"}, &ucli.BoolFlag{Name: "quiet"}},
		Commands: []*ucli.Command{{Name: "sub", Flags: []ucli.Flag{&ucli.IntFlag{Name: "k"}, &ucli.BoolFlag{Name: "all", Aliases: []string{"a"}}}}},
	}
	for _, c := range []struct{ in, want []string }{
		{[]string{"x", "a.jsonl", "--out", "s", "b.jsonl", "--quiet"}, []string{"x", "--out", "s", "--quiet", "a.jsonl", "b.jsonl"}},
		{[]string{"x", "--out", "s", "a"}, []string{"x", "--out", "s", "a"}},
		{[]string{"x", "sub", "f1", "--k", "2", "-a", "f2", "--k=3"}, []string{"x", "sub", "--k", "2", "-a", "--k=3", "f1", "f2"}},
		{[]string{"x", "--quiet", "sub", "f", "--k", "-1"}, []string{"x", "--quiet", "sub", "--k", "-1", "f"}},
		{[]string{"x", "a", "-", "--out", "s", "--", "--not-a-flag"}, []string{"x", "--out", "s", "a", "-", "--", "--not-a-flag"}},
		{[]string{"x", "a", "--help"}, []string{"x", "--help", "a"}},
		{[]string{"x"}, []string{"x"}},
	} {
		if got := FlagsAnywhere(app, c.in); !slices.Equal(got, c.want) {
			t.Errorf("FlagsAnywhere(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestRequireWording(t *testing.T) {
	var got error
	app := &ucli.App{Name: "x", Flags: []ucli.Flag{&ucli.StringFlag{Name: "out"}, &ucli.StringFlag{Name: "corpus"}, &ucli.IntFlag{Name: "n"}},
		Action: func(c *ucli.Context) error { got = Require(c, "corpus", "out", "n"); return nil }}
	app.Run([]string{"x", "--out", "o", "--n", "0"})
	if got == nil || got.Error() != "missing required flag --corpus" {
		t.Errorf("one missing: %v", got)
	}
	app.Run([]string{"x", "--out", ""})
	if got == nil || got.Error() != "missing required flags --corpus, --out, --n" {
		t.Errorf("three missing: %v", got)
	}
}
