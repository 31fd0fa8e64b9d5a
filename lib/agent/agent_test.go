package agent

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func mustAgent(t *testing.T, cfg Config) (*Agent, *testTok) {
	t.Helper()
	tok := newTestTok()
	a, err := New(cfg, tok)
	if err != nil {
		t.Fatal(err)
	}
	return a, tok
}

func eqIDs(t *testing.T, what string, got, want []int) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		n := 0
		for n < len(got) && n < len(want) && got[n] == want[n] {
			n++
		}
		t.Fatalf("%s: ids differ at %d (len got %d, want %d)\n got: %v\nwant: %v", what, n, len(got), len(want), got, want)
	}
}

var testDocs = [][]Doc{
	{{ID: "11", Contents: "\"Eiffel Tower\"\nThe Eiffel Tower is in Paris."}, {ID: "12", Contents: "\"Paris\"\nParis is the capital of France."}},
	{{ID: "21", Contents: "\"Gustave Eiffel\"\nEiffel was born in Dijon."}},
	{{ID: "31", Contents: "\"Dijon\"\nDijon is in Burgundy."}},
}

// step builds a valid output text.
func step(mem, think, tag, content string) string {
	return "<mem>" + mem + "</mem>\n<think>" + think + "</think>\n<" + tag + ">" + content + "</" + tag + ">"
}

// scripted outputs: three searches then an answer. The second output is
// given byte by byte, a tokenization the tokenizer would not produce, to
// show that contexts carry the sampled ids, not a re-encoding.
func scriptedOutputs(tok *testTok) [][]int {
	return [][]int{
		tok.Encode(step("nothing yet", "find the tower", "search", "Eiffel Tower city")),
		bytesOf(step("tower in Paris", "who built it", "search", "Eiffel Tower builder")),
		tok.Encode(step("Paris; built by Gustave Eiffel", "where was he born", "search", "Gustave Eiffel birthplace")),
		tok.Encode(step("Paris; Eiffel born in Dijon", "done", "answer", "Paris; Dijon")),
	}
}

// runScript drives a trajectory with the scripted outputs and docs and
// returns it with the context each step was given.
func runScript(t *testing.T, a *Agent, outs [][]int) (*Trajectory, [][]int) {
	t.Helper()
	tr := a.NewTrajectory([]string{"In which city is the Eiffel Tower?", "Where was its builder born?"})
	var ctxs [][]int
	for i, o := range outs {
		if tr.Done() {
			t.Fatalf("trajectory ended before step %d", i+1)
		}
		ctxs = append(ctxs, tr.Context())
		res, err := tr.Step(o, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.NeedSearch {
			if err := tr.Observe(testDocs[i%len(testDocs)]); err != nil {
				t.Fatal(err)
			}
		}
	}
	return tr, ctxs
}

// TestContextKeep1 checks, id by id, that the context of every step is the
// prompt plus only the previous step and its observation, wrapped in
// ChatML turns exactly where BuildContext documents.
func TestContextKeep1(t *testing.T) {
	a, tok := mustAgent(t, DefaultConfig())
	outs := scriptedOutputs(tok)
	tr, ctxs := runScript(t, a, outs)
	if !tr.Done() || tr.Failure != FailNone || !tr.FormatOK {
		t.Fatalf("done=%v failure=%q formatOK=%v", tr.Done(), tr.Failure, tr.FormatOK)
	}
	task := a.TaskText(tr.Questions)
	prompt := tok.Encode("<|im_start|>system\n" + Qwen25System + "<|im_end|>\n<|im_start|>user\n" + task + "<|im_end|>\n")
	gen := []int{idImStart, 300 + 18} // <|im_start|> "assistant\n"
	eqIDs(t, "step 1 context", ctxs[0], cat(prompt, gen))
	for i := 1; i < len(outs); i++ {
		obs := tr.Steps[i-1].ObsIDs
		want := cat(prompt,
			[]int{idImStart}, tok.Encode("assistant\n"), outs[i-1], []int{idImEnd}, tok.Encode("\n"),
			[]int{idImStart}, tok.Encode("user\n"), obs, []int{idImEnd}, tok.Encode("\n"),
			gen)
		eqIDs(t, "step context", ctxs[i], want)
		eqIDs(t, "recorded context", tr.Steps[i].ContextIDs, want)
	}
	// The readable form is the ChatML text of [system, user, assistant,
	// user] plus the generation prompt.
	wantText := "<|im_start|>system\n" + Qwen25System + "<|im_end|>\n<|im_start|>user\n" + task + "<|im_end|>\n" +
		"<|im_start|>assistant\n" + step("Paris; built by Gustave Eiffel", "where was he born", "search", "Gustave Eiffel birthplace") + "<|im_end|>\n" +
		"<|im_start|>user\n<information>[Turns left: 13]\nDoc 1(Title: Dijon) Dijon is in Burgundy.</information><|im_end|>\n" +
		"<|im_start|>assistant\n"
	if got := tok.Decode(ctxs[3]); got != wantText {
		t.Fatalf("step 4 context text:\n%q\nwant\n%q", got, wantText)
	}
	// Step 3's context holds the byte-level ids of step 2 verbatim.
	if !containsRun(ctxs[2], outs[1]) || containsRun(ctxs[2], tok.Encode(tok.Decode(outs[1]))) {
		t.Fatal("step 3 context does not hold step 2's sampled ids verbatim")
	}
	if tr.AnswerText != "Paris; Dijon" || !reflect.DeepEqual(tr.Answers, []string{"Paris", "Dijon"}) || !tr.AnswerCount {
		t.Fatalf("answer %q %q count=%v", tr.AnswerText, tr.Answers, tr.AnswerCount)
	}
	if tr.Steps[3].Action != "answer" || tr.Steps[0].Action != "search" || tr.Steps[3].ObsIDs != nil {
		t.Fatalf("actions %q %q", tr.Steps[0].Action, tr.Steps[3].Action)
	}
	if !reflect.DeepEqual(tr.Steps[0].DocIDs, []string{"11", "12"}) || tr.Steps[1].Query != "Eiffel Tower builder" {
		t.Fatalf("doc ids %v, query %q", tr.Steps[0].DocIDs, tr.Steps[1].Query)
	}
}

func containsRun(hay, needle []int) bool {
	for i := 0; i+len(needle) <= len(hay); i++ {
		if reflect.DeepEqual(hay[i:i+len(needle)], needle) {
			return true
		}
	}
	return false
}

// TestContextKeepAllAndK checks keep-all (every previous step) and K = 2
// (the last two) against contexts assembled by hand.
func TestContextKeepAllAndK(t *testing.T) {
	for _, keep := range []Keep{KeepAll, 2, 3} {
		cfg := DefaultConfig()
		cfg.Keep = keep
		a, tok := mustAgent(t, cfg)
		outs := scriptedOutputs(tok)
		tr, ctxs := runScript(t, a, outs)
		prompt := tr.PromptIDs()
		gen := tok.Encode("<|im_start|>assistant\n")
		turn := func(j int) []int {
			return cat(tok.Encode("<|im_start|>assistant\n"), outs[j], tok.Encode("<|im_end|>\n<|im_start|>user\n"),
				tr.Steps[j].ObsIDs, tok.Encode("<|im_end|>\n"))
		}
		for i := range outs {
			first := 0
			if keep != KeepAll && i > int(keep) {
				first = i - int(keep)
			}
			want := prompt
			for j := first; j < i; j++ {
				want = cat(want, turn(j))
			}
			eqIDs(t, "context", ctxs[i], cat(want, gen))
		}
	}
}

// TestContextRaw checks raw (base-model) rendering: no chat wrapping, the
// observation carries its own blank lines, no generation prompt.
func TestContextRaw(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Chat = false
	a, tok := mustAgent(t, cfg)
	outs := scriptedOutputs(tok)
	tr, ctxs := runScript(t, a, outs)
	prompt := tok.Encode(a.TaskText(tr.Questions) + "\n")
	eqIDs(t, "prompt", tr.PromptIDs(), prompt)
	eqIDs(t, "step 1", ctxs[0], prompt)
	eqIDs(t, "step 2", ctxs[1], cat(prompt, outs[0], tr.Steps[0].ObsIDs))
	obs := "\n\n<information>[Turns left: 14]\nDoc 1(Title: Gustave Eiffel) Eiffel was born in Dijon.</information>\n\n"
	if tr.Steps[1].ObsText != obs {
		t.Fatalf("raw observation %q, want %q", tr.Steps[1].ObsText, obs)
	}
	eqIDs(t, "step 3", ctxs[2], cat(prompt, outs[1], tok.Encode(obs)))
}

// TestObservationFormat checks the passage layout, the title quotes, the
// topk cut and the hint, text and ids.
func TestObservationFormat(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TopK = 2
	a, tok := mustAgent(t, cfg)
	docs := []Doc{
		{ID: "1", Contents: "\"Evan Morris\"\nEvan L. Morris was a lobbyist.\nHe died in 2015."},
		{ID: "2", Title: "Plain", Text: "No contents field."},
		{ID: "3", Contents: "\"Third\"\nnever shown"},
	}
	o := a.Observation(docs, 5)
	want := "<information>[Turns left: 5]\nDoc 1(Title: Evan Morris) Evan L. Morris was a lobbyist.\nHe died in 2015.\nDoc 2(Title: Plain) No contents field.</information>"
	if o.Text != want || o.Cut {
		t.Fatalf("observation %q (cut %v), want %q", o.Text, o.Cut, want)
	}
	eqIDs(t, "observation ids", o.IDs, tok.Encode(want))

	cfg.TitleQuotes, cfg.TurnsHint = true, false
	a, _ = mustAgent(t, cfg)
	o = a.Observation(docs[:1], 5)
	if want := "<information>Doc 1(Title: \"Evan Morris\") Evan L. Morris was a lobbyist.\nHe died in 2015.</information>"; o.Text != want {
		t.Fatalf("observation with quotes %q, want %q", o.Text, want)
	}
	if o = a.Observation(nil, 5); o.Text != "<information>No passages found.</information>" {
		t.Fatalf("empty observation %q", o.Text)
	}
}

// TestObservationCut checks the token cut: exactly the limit, passages cut
// at the end, the opening tag, hint and closing tag kept.
func TestObservationCut(t *testing.T) {
	for _, chat := range []bool{true, false} {
		cfg := DefaultConfig()
		cfg.Chat = chat
		cfg.ObsMaxTokens = 120
		a, tok := mustAgent(t, cfg)
		docs := []Doc{{ID: "1", Contents: "\"Long\"\n" + strings.Repeat("word ", 60)}}
		o := a.Observation(docs, 4)
		if len(o.IDs) != 120 || !o.Cut {
			t.Fatalf("chat=%v: %d ids (cut %v), want exactly 120", chat, len(o.IDs), o.Cut)
		}
		pre, suf := "<information>[Turns left: 4]\n", "</information>"
		if !chat {
			pre, suf = "\n\n"+pre, suf+"\n\n"
		}
		preIDs, sufIDs := tok.Encode(pre), tok.Encode(suf)
		eqIDs(t, "kept head", o.IDs[:len(preIDs)], preIDs)
		eqIDs(t, "kept closing tag", o.IDs[len(o.IDs)-len(sufIDs):], sufIDs)
		body := tok.Encode(a.PassagesText(docs))
		eqIDs(t, "cut passages", o.IDs[len(preIDs):len(o.IDs)-len(sufIDs)], body[:120-len(preIDs)-len(sufIDs)])
		// Under the limit nothing is cut.
		short := a.Observation([]Doc{{Contents: "\"S\"\nshort"}}, 4)
		if short.Cut || short.Text != pre+"Doc 1(Title: S) short"+suf {
			t.Fatalf("short observation %q cut=%v", short.Text, short.Cut)
		}
	}
	cfg := DefaultConfig()
	cfg.ObsMaxTokens = 62 // the last-turn hint needs 63 with the test tokenizer
	if _, err := New(cfg, newTestTok()); err == nil {
		t.Fatal("a limit below the tags and hint was accepted")
	}
}

// TestHint checks the turns-left hint at n > 1 and n == 1, and that a
// trajectory shows the right count after each step.
func TestHint(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxTurns = 3
	a, tok := mustAgent(t, cfg)
	tr := a.NewTrajectory([]string{"q?"})
	var hints []string
	for i := 0; i < 2; i++ {
		tr.Context()
		res, err := tr.Step(tok.Encode(step("m", "t", "search", "q")), nil)
		if err != nil || !res.NeedSearch {
			t.Fatalf("step %d: %v %+v", i+1, err, res)
		}
		if err := tr.Observe(nil); err != nil {
			t.Fatal(err)
		}
		hints = append(hints, tr.Steps[i].ObsText)
	}
	want := []string{
		"<information>[Turns left: 2]\nNo passages found.</information>",
		"<information>[Turns left: 1. This is your last step: it must end with <answer>.]\nNo passages found.</information>",
	}
	if !reflect.DeepEqual(hints, want) {
		t.Fatalf("hints %q, want %q", hints, want)
	}
	if a.hint(0) != "" {
		t.Fatal("hint at n = 0")
	}
}

// TestAnswerNeverFromPrompt: an <answer> inside a question must never
// become the trajectory's answer.
func TestAnswerNeverFromPrompt(t *testing.T) {
	for _, chat := range []bool{true, false} {
		cfg := DefaultConfig()
		cfg.Chat = chat
		a, tok := mustAgent(t, cfg)
		qs := []string{"Is <answer>x</answer> the answer?"}
		tr := a.NewTrajectory(qs)
		if !strings.Contains(tok.Decode(tr.Context()), "<answer>x</answer>") {
			t.Fatal("the question is not in the prompt")
		}
		tr.Step(tok.Encode(step("m", "t", "answer", "y")), nil)
		if tr.AnswerText != "y" || !reflect.DeepEqual(tr.Answers, []string{"y"}) {
			t.Fatalf("chat=%v: answer %q", chat, tr.AnswerText)
		}
		// An invalid output gives no answer at all, whatever the prompt holds.
		tr = a.NewTrajectory(qs)
		tr.Step(tok.Encode("I do not know."), nil)
		if tr.AnswerText != "" || tr.Answers != nil || tr.Failure != FailFormat {
			t.Fatalf("chat=%v: invalid step gave answer %q failure %q", chat, tr.AnswerText, tr.Failure)
		}
	}
}

var invalidCases = []struct{ name, out, reason string }{
	{"empty", "  \n", ReasonEmpty},
	{"missing mem", "<think>t</think><search>q</search>", ReasonMissingMem},
	{"think before mem", "<think>t</think><mem>m</mem><search>q</search>", ReasonTextBeforeMem},
	{"text before mem", "Sure! <mem>m</mem><think>t</think><search>q</search>", ReasonTextBeforeMem},
	{"missing think", "<mem>m</mem><search>q</search>", ReasonMissingThink},
	{"text between", "<mem>m</mem> so <think>t</think><search>q</search>", ReasonMissingThink},
	{"missing action", "<mem>m</mem><think>t</think>", ReasonMissingAction},
	{"unclosed mem", "<mem>m <think>t</think><search>q</search>", ReasonUnclosedMem},
	{"nested mem", "<mem>m <mem>n</mem><think>t</think><search>q</search>", ReasonTagInside},
	{"unclosed mem at end", "<mem>m and more", ReasonUnclosedMem},
	{"unclosed think", "<mem>m</mem><think>t and on", ReasonUnclosedThink},
	{"unclosed action", "<mem>m</mem><think>t</think><answer>Paris", ReasonUnclosedAction},
	{"two actions", "<mem>m</mem><think>t</think><search>a</search><search>b</search>", ReasonMultiAction},
	{"search then answer", "<mem>m</mem><think>t</think><search>a</search>\n<answer>b</answer>", ReasonMultiAction},
	{"text after action", "<mem>m</mem><think>t</think><answer>Paris</answer> because it is.", ReasonTextAfter},
	{"action in think", "<mem>m</mem><think>t <search>x</search></think><search>q</search>", ReasonTagInside},
	{"empty query", "<mem>m</mem><think>t</think><search>  </search>", ReasonEmptyQuery},
	{"empty answer", "<mem>m</mem><think>t</think><answer></answer>", ReasonEmptyAnswer},
	{"wrong tool tag", "<mem>m</mem><think>t</think><tool_call>q</tool_call>", ReasonMissingAction},
}

// TestInvalidEnds: every malformed output ends the trajectory as a format
// failure under the default policy.
func TestInvalidEnds(t *testing.T) {
	a, tok := mustAgent(t, DefaultConfig())
	for _, c := range invalidCases {
		tr := a.NewTrajectory([]string{"q?"})
		tr.Context()
		res, err := tr.Step(tok.Encode(c.out), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Valid || res.Reason != c.reason || res.NeedSearch || !res.Done || res.Kind != ActionNone {
			t.Errorf("%s: valid=%v reason=%q (want %q) needSearch=%v done=%v", c.name, res.Valid, res.Reason, c.reason, res.NeedSearch, res.Done)
		}
		if tr.Failure != FailFormat || tr.FormatOK || tr.AnswerText != "" || tr.InvalidSteps != 1 {
			t.Errorf("%s: failure %q formatOK %v answer %q", c.name, tr.Failure, tr.FormatOK, tr.AnswerText)
		}
		if tr.Context() != nil {
			t.Errorf("%s: a context after the end", c.name)
		}
	}
	// White space around and between the blocks is fine.
	if p := a.Parse(tok.Encode("\n <mem> m </mem>\n\n<think>t</think> <answer> a </answer>\n")); !p.Valid || p.Answer != "a" || p.Mem != "m" {
		t.Fatalf("spaced output: %+v", p)
	}
}

// TestInvalidCorrects: under CorrectOnInvalid the invalid step gets the
// corrective message as its observation, the next context holds it, and a
// later answer is taken but the trajectory is not format-correct.
func TestInvalidCorrects(t *testing.T) {
	cfg := DefaultConfig()
	cfg.OnInvalid = CorrectOnInvalid
	a, tok := mustAgent(t, cfg)
	tr := a.NewTrajectory([]string{"q?"})
	bad := tok.Encode("<mem>m</mem><think>t</think><answer>x</answer> trailing")
	tr.Context()
	res, _ := tr.Step(bad, nil)
	if res.Done || res.NeedSearch || res.Valid {
		t.Fatalf("corrected step: %+v", res)
	}
	msg := "Your last step did not follow the format (text_after_action). Write <mem>...</mem><think>...</think> and then exactly one action, <search>query</search> or <answer>...</answer>, with nothing after it.\n[Turns left: 15]"
	if tr.Steps[0].ObsText != msg {
		t.Fatalf("corrective %q", tr.Steps[0].ObsText)
	}
	ctx := tr.Context()
	want := cat(tr.PromptIDs(), tok.Encode("<|im_start|>assistant\n"), bad, tok.Encode("<|im_end|>\n<|im_start|>user\n"+msg+"<|im_end|>\n<|im_start|>assistant\n"))
	eqIDs(t, "context after correction", ctx, want)
	tr.Step(tok.Encode(step("m", "t", "answer", "x")), nil)
	if !tr.Done() || tr.Failure != FailNone || tr.AnswerText != "x" || tr.FormatOK || tr.InvalidSteps != 1 {
		t.Fatalf("after correction: done=%v failure=%q answer=%q formatOK=%v", tr.Done(), tr.Failure, tr.AnswerText, tr.FormatOK)
	}
	// Invalid at the last turn ends with max_turns.
	cfg.MaxTurns = 1
	a, _ = mustAgent(t, cfg)
	tr = a.NewTrajectory([]string{"q?"})
	tr.Step(bad, nil)
	if !tr.Done() || tr.Failure != FailMaxTurns {
		t.Fatalf("invalid last turn: done=%v failure=%q", tr.Done(), tr.Failure)
	}
}

// TestMaxTurns: a trajectory that only searches ends after MaxTurns steps
// as a max_turns failure, and its last search needs no retrieval.
func TestMaxTurns(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxTurns = 3
	a, tok := mustAgent(t, cfg)
	tr := a.NewTrajectory([]string{"q?"})
	for i := 0; i < 3; i++ {
		res, err := tr.Step(tok.Encode(step("m", "t", "search", "q")), nil)
		if err != nil {
			t.Fatal(err)
		}
		if last := i == 2; res.NeedSearch == last || res.Done != last {
			t.Fatalf("step %d: needSearch=%v done=%v", i+1, res.NeedSearch, res.Done)
		}
		if i < 2 {
			tr.Observe(nil)
		}
	}
	if tr.Failure != FailMaxTurns || tr.FormatOK || tr.Turns != 3 || tr.Steps[2].Query != "q" || tr.Steps[2].ObsIDs != nil {
		t.Fatalf("failure %q formatOK %v turns %d", tr.Failure, tr.FormatOK, tr.Turns)
	}
	if _, err := tr.Step(tok.Encode("x"), nil); !errors.Is(err, ErrState) {
		t.Fatalf("Step after the end: %v", err)
	}
}

// TestStateErrors: calls out of order are refused.
func TestStateErrors(t *testing.T) {
	a, tok := mustAgent(t, DefaultConfig())
	tr := a.NewTrajectory([]string{"q?"})
	if err := tr.Observe(nil); !errors.Is(err, ErrState) {
		t.Fatalf("Observe before Step: %v", err)
	}
	if _, err := tr.Step(tok.Encode("ab"), []float32{0}); err == nil {
		t.Fatal("mismatched log-probs accepted")
	}
	tr.Step(tok.Encode(step("m", "t", "search", "q")), nil)
	if tr.Context() != nil {
		t.Fatal("a context while waiting for an observation")
	}
	if _, err := tr.Step(tok.Encode("x"), nil); !errors.Is(err, ErrState) {
		t.Fatalf("Step before Observe: %v", err)
	}
}

// TestMemSpan checks that the mem token span decodes to the mem block, with
// straddling tokens included, with multi-byte characters split over byte
// tokens, and after a leading straddle.
func TestMemSpan(t *testing.T) {
	a, tok := mustAgent(t, DefaultConfig())
	cases := []struct {
		name string
		ids  []int
		want string // decoding of the span
	}{
		{"clean", tok.Encode(step("facts", "t", "search", "q")), "<mem>facts</mem>"},
		{"bytes, multibyte", bytesOf(step("café → Zürich", "t", "search", "q")), "<mem>café → Zürich</mem>"},
		// "y</mem>\n" is one token: the span ends with it, newline included.
		{"straddle end", tok.Encode("<mem>a y</mem>\n<think>t</think><search>q</search>"), "<mem>a y</mem>\n"},
		// White space before the block and a two-byte character inside it.
		{"leading newline", tok.Encode("\n<mem>é</mem><think>t</think><answer>a</answer>"), "<mem>é</mem>"},
	}
	for _, c := range cases {
		p := a.Parse(c.ids)
		if p.MemStart < 0 {
			t.Fatalf("%s: no span (%s)", c.name, p.Reason)
		}
		if got := tok.Decode(c.ids[p.MemStart:p.MemEnd]); got != c.want {
			t.Errorf("%s: span [%d,%d) decodes to %q, want %q", c.name, p.MemStart, p.MemEnd, got, c.want)
		}
	}
	// A straddling token at the start: "x<mem" puts a non-space character
	// before the block, so the step is invalid, and the span still starts at
	// that token.
	ids := tok.Encode("x<mem>m</mem><think>t</think><answer>a</answer>")
	if p := a.Parse(ids); p.Valid || p.Reason != ReasonTextBeforeMem || p.MemStart != -1 {
		t.Fatalf("x<mem: %+v", p)
	}
	span := func(text string, cs, ce int) string {
		ids := tok.Encode(text)
		s, e := tokenSpan(tok, ids, tok.Decode(ids), cs, ce)
		return tok.Decode(ids[s:e])
	}
	if got := span("ax<mem>m</mem>", 2, 14); got != "x<mem>m</mem>" {
		t.Fatalf("straddling start token: %q", got)
	}
	// The trajectory records the span too.
	tr, _ := runScript(t, a, scriptedOutputs(tok))
	for i, s := range tr.Steps {
		if got, want := tok.Decode(s.OutputIDs[s.MemStart:s.MemEnd]), "<mem>"+s.Mem+"</mem>"; got != want {
			t.Fatalf("step %d: span %q, want %q", i+1, got, want)
		}
	}
}

// TestTokenCounts checks per-step counts, total and peak against numbers
// worked out by hand for a raw-mode, one-byte-per-character setting.
func TestTokenCounts(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Chat, cfg.TurnsHint = false, false
	cfg.TaskPrompt = "Q: {questions}"
	a, _ := mustAgent(t, cfg)
	tr := a.NewTrajectory([]string{"a?"})
	// prompt "Q: a?\n" = 6 ids
	o1 := bytesOf("<mem></mem><think></think><search>z</search>") // 44 ids
	o2 := bytesOf("<mem></mem><think></think><answer>z</answer>") // 44 ids
	tr.Step(o1, nil)
	tr.Observe([]Doc{{Contents: "\"T\"\nu"}})
	// observation "\n\n" "<information>" "Doc " "1" "(Title: " "T" ")" " " "u" "</information>" "\n\n"
	// = 2 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 2 = 13 ids
	tr.Step(o2, nil)
	if len(o1) != 44 || len(o2) != 44 || len(tr.Steps[0].ObsIDs) != 13 {
		t.Fatalf("hand counts off: %d %d %d", len(o1), len(o2), len(tr.Steps[0].ObsIDs))
	}
	// step 1: context 6, output 44 → 50; step 2: context 6+44+13 = 63, output 44 → 107
	s := tr.Steps
	if s[0].ContextTokens != 6 || s[0].OutputTokens != 44 || s[1].ContextTokens != 63 || s[1].OutputTokens != 44 {
		t.Fatalf("step counts %d+%d, %d+%d", s[0].ContextTokens, s[0].OutputTokens, s[1].ContextTokens, s[1].OutputTokens)
	}
	if tr.TotalTokens != 157 || tr.PeakTokens != 107 || tr.Turns != 2 {
		t.Fatalf("total %d (want 157), peak %d (want 107), turns %d", tr.TotalTokens, tr.PeakTokens, tr.Turns)
	}
	// With keep 1 the peak of a long trajectory stays bounded while the
	// full-history total grows: step 3 of the scripted run sees only step 2.
	a1, tok := mustAgent(t, DefaultConfig())
	trK, _ := runScript(t, a1, scriptedOutputs(tok))
	cfgAll := DefaultConfig()
	cfgAll.Keep = KeepAll
	aAll, _ := mustAgent(t, cfgAll)
	trAll, _ := runScript(t, aAll, scriptedOutputs(tok))
	if trK.PeakTokens >= trAll.PeakTokens || trK.TotalTokens >= trAll.TotalTokens {
		t.Fatalf("keep 1 peak/total %d/%d not below keep all %d/%d", trK.PeakTokens, trK.TotalTokens, trAll.PeakTokens, trAll.TotalTokens)
	}
}

// TestToolCallTag: with the tool_call tag the search action is
// <tool_call>q</tool_call>, <search> is not an action, and the stop strings
// and prompt follow.
func TestToolCallTag(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ToolTag = "tool_call"
	a, tok := mustAgent(t, cfg)
	if got := a.StopStrings(); !reflect.DeepEqual(got, []string{"</tool_call>", "</answer>"}) {
		t.Fatalf("stop strings %q", got)
	}
	tr := a.NewTrajectory([]string{"q?"})
	if txt := tok.Decode(tr.Context()); !strings.Contains(txt, "<tool_call>query</tool_call>") || strings.Contains(txt, "<search>") {
		t.Fatal("prompt does not describe the tool_call action")
	}
	res, _ := tr.Step(tok.Encode(step("m", "t", "tool_call", "Eiffel")), nil)
	if !res.Valid || !res.NeedSearch || res.Query != "Eiffel" || res.Kind != ActionSearch {
		t.Fatalf("tool_call step: %+v", res)
	}
	if p := a.Parse(tok.Encode(step("m", "t", "search", "Eiffel"))); p.Valid || p.Reason != ReasonMissingAction {
		t.Fatalf("<search> under tool_call: %+v", p)
	}
}

// TestStopAndEOS: TrimToStop keeps the stop string; text past the stop
// string inside the same token is tolerated, in a later token it is not;
// a trailing <|im_end|> is left out of parsing and closes the turn once.
func TestStopAndEOS(t *testing.T) {
	a, tok := mustAgent(t, DefaultConfig())
	full := tok.Encode(step("m", "t", "search", "q") + "\n<information>made up</information>")
	trimmed := a.TrimToStop(full)
	if got := tok.Decode(trimmed); got != step("m", "t", "search", "q") {
		t.Fatalf("trimmed to %q", got)
	}
	// A stop string spread over many byte tokens, with more text after it.
	byByte := bytesOf(step("m", "t", "answer", "a") + " and more")
	if got := a.TrimToStop(byByte); len(got) != len(step("m", "t", "answer", "a")) {
		t.Fatalf("byte-level output trimmed to %q", tok.Decode(got))
	}
	if got := a.TrimToStop(tok.Encode("no stop")); tok.Decode(got) != "no stop" {
		t.Fatal("TrimToStop changed an output without a stop string")
	}
	// "</answer>!!" is one token in the test vocabulary.
	p := a.Parse(tok.Encode("<mem>m</mem><think>t</think><answer>a</answer>!!"))
	if !p.Valid || p.Answer != "a" {
		t.Fatalf("tail inside the stop token: %+v", p)
	}
	p = a.Parse(cat(tok.Encode("<mem>m</mem><think>t</think><answer>a</answer>"), bytesOf("!!")))
	if p.Valid || p.Reason != ReasonTextAfter {
		t.Fatalf("tail in later tokens: %+v", p)
	}
	// An output ending in <|im_end|>: valid, and the context closes its
	// turn with "\n" only.
	cfg := DefaultConfig()
	cfg.OnInvalid = CorrectOnInvalid
	cfg.EOSIDs = []int{idEOT}
	a, _ = mustAgent(t, cfg)
	out := cat(tok.Encode(step("m", "t", "search", "q")), []int{idImEnd})
	tr := a.NewTrajectory([]string{"q?"})
	res, _ := tr.Step(out, nil)
	if !res.Valid {
		t.Fatalf("output with <|im_end|>: %s", res.Reason)
	}
	tr.Observe(nil)
	want := cat(tr.PromptIDs(), tok.Encode("<|im_start|>assistant\n"), out, tok.Encode("\n<|im_start|>user\n"),
		tr.Steps[0].ObsIDs, tok.Encode("<|im_end|>\n<|im_start|>assistant\n"))
	eqIDs(t, "context after <|im_end|>", tr.Context(), want)
	if p := a.Parse(cat(tok.Encode(step("m", "t", "answer", "a")), []int{idEOT})); !p.Valid {
		t.Fatalf("output with a configured EOS: %s", p.Reason)
	}
}

// TestMemorySequences checks both teacher-forcing sequences id by id and
// that the gold range decodes to the joined first aliases.
func TestMemorySequences(t *testing.T) {
	a, tok := mustAgent(t, DefaultConfig())
	outs := scriptedOutputs(tok)
	tr, ctxs := runScript(t, a, outs)
	golds := [][]string{{" Paris ", "Paris, France"}, {"", "Dijon"}}
	gold, err := GoldText(golds)
	if err != nil || gold != "Paris; Dijon" {
		t.Fatalf("gold %q %v", gold, err)
	}
	lead := tok.Encode(DefaultScoreLeadIn)
	g := tok.Encode(gold)
	gen := tok.Encode("<|im_start|>assistant\n")
	for i := range tr.Steps {
		s, err := tr.MemorySequences(i, golds)
		if err != nil {
			t.Fatal(err)
		}
		st := tr.Steps[i]
		eqIDs(t, "memory sequence", s.Mem, cat(tr.PromptIDs(), gen, st.OutputIDs[st.MemStart:st.MemEnd], lead, g))
		// The raw history before step i is step i's keep-all context: here
		// built from the keep-1 run's records, none of it dropped.
		hist := tr.PromptIDs()
		for j := 0; j < i; j++ {
			hist = cat(hist, gen, outs[j], tok.Encode("<|im_end|>\n<|im_start|>user\n"), tr.Steps[j].ObsIDs, tok.Encode("<|im_end|>\n"))
		}
		eqIDs(t, "history sequence", s.Hist, cat(hist, gen, lead, g))
		if i == 1 {
			// At step 2 keep 1 and keep all see the same past.
			eqIDs(t, "history = context at step 2", s.Hist[:len(ctxs[1])], ctxs[1])
		}
		if tok.Decode(s.Mem[s.MemGoldStart:s.MemGoldEnd]) != gold || tok.Decode(s.Hist[s.HistGoldStart:s.HistGoldEnd]) != gold ||
			s.MemGoldEnd != len(s.Mem) || s.HistGoldEnd != len(s.Hist) {
			t.Fatalf("step %d: gold ranges wrong", i+1)
		}
	}
	// seqsWith is step's memory sequences under the default config changed
	// by set.
	seqsWith := func(set func(*Config), step int) MemorySeqs {
		t.Helper()
		cfg := DefaultConfig()
		set(&cfg)
		ca, _ := mustAgent(t, cfg)
		ctr, _ := runScript(t, ca, outs)
		s, err := ctr.MemorySequences(step, golds)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// ScoreGoldPrefix: the gold is encoded with the prefix, as a policy that
	// answers "<answer> Paris; Dijon" writes it.
	ps := seqsWith(func(c *Config) { c.ScoreGoldPrefix = " " }, 0)
	eqIDs(t, "prefixed gold", ps.Mem[ps.MemGoldStart:ps.MemGoldEnd], tok.Encode(" "+gold))
	eqIDs(t, "prefixed gold ids", ps.GoldIDs, tok.Encode(" "+gold))
	// ScoreGoldNumbered: each part after its marker, as a policy that
	// answers "<answer>[1] Paris; [2] Dijon" writes it.
	ns := seqsWith(func(c *Config) { c.ScoreGoldNumbered = true }, 0)
	if ns.Gold != "[1] Paris; [2] Dijon" {
		t.Fatalf("numbered gold %q", ns.Gold)
	}
	eqIDs(t, "numbered gold ids", ns.Mem[ns.MemGoldStart:ns.MemGoldEnd], tok.Encode("[1] Paris; [2] Dijon"))
	// A lead-in that names the number of questions.
	ks := seqsWith(func(c *Config) { c.ScoreLeadIn = "<think>all {k} answers are known</think><answer>" }, 1)
	klead := tok.Encode("<think>all 2 answers are known</think><answer>")
	eqIDs(t, "lead-in with {k}", ks.Mem[ks.MemGoldStart-len(klead):ks.MemGoldStart], klead)
	eqIDs(t, "lead-in with {k}, history", ks.Hist[ks.HistGoldStart-len(klead):ks.HistGoldStart], klead)
	// ScoreNextStep: the memory as a closed assistant turn of its own, as
	// the next step's keep-1 context would render its step without the
	// observation, then the generation prompt, lead-in and gold; the history
	// term is the turn layout's, so that the two share one template: prompt
	// ⊕ closed turns ⊕ generation prompt ⊕ lead-in ⊕ gold.
	closeTurn := tok.Encode("<|im_end|>\n")
	for i := range tr.Steps {
		ts, err := tr.MemorySequences(i, golds)
		if err != nil {
			t.Fatal(err)
		}
		ns := seqsWith(func(c *Config) { c.ScoreLayout = ScoreNextStep }, i)
		st := tr.Steps[i]
		mem := st.OutputIDs[st.MemStart:st.MemEnd]
		eqIDs(t, "next-step memory sequence", ns.Mem, cat(tr.PromptIDs(), gen, mem, closeTurn, gen, lead, g))
		eqIDs(t, "next-step history sequence", ns.Hist, ts.Hist)
		if ns.MemGoldStart != len(ns.Mem)-len(g) || ns.HistGoldStart != ts.HistGoldStart || ns.HistGoldEnd != ts.HistGoldEnd {
			t.Fatalf("step %d: next-step gold ranges wrong", i+1)
		}
		// One template: the memory sequence is the history sequence with
		// the raw steps replaced by the memory turn.
		steps := ns.Hist[len(tr.PromptIDs()) : len(ns.Hist)-len(gen)-len(lead)-len(g)]
		swapped := cat(ns.Hist[:len(tr.PromptIDs())], gen, mem, closeTurn, ns.Hist[len(tr.PromptIDs())+len(steps):])
		eqIDs(t, "memory turn in the raw steps' place", ns.Mem, swapped)
	}
	// ScorePerObjective: GoldEnds split the gold ids at each part's end
	// (numbered and with a prefix too); nil without it.
	if ts := seqsWith(func(c *Config) {}, 0); ts.GoldEnds != nil {
		t.Fatalf("gold ends %v without per-objective scoring", ts.GoldEnds)
	}
	for _, set := range []func(*Config){
		func(c *Config) {},
		func(c *Config) { c.ScoreGoldNumbered = true },
		func(c *Config) { c.ScoreGoldPrefix = " " },
	} {
		os := seqsWith(func(c *Config) { set(c); c.ScorePerObjective = true }, 1)
		parts := strings.Split(os.Gold, "; ")
		if len(os.GoldEnds) != 2 || os.GoldEnds[1] != len(os.GoldIDs) {
			t.Fatalf("gold %q: ends %v of %d ids", os.Gold, os.GoldEnds, len(os.GoldIDs))
		}
		if got := strings.TrimSpace(tok.Decode(os.GoldIDs[:os.GoldEnds[0]])); got != parts[0] {
			t.Fatalf("gold %q: first objective's ids decode to %q", os.Gold, got)
		}
		if got := tok.Decode(os.GoldIDs[os.GoldEnds[0]:]); got != "; "+parts[1] {
			t.Fatalf("gold %q: second objective's ids decode to %q", os.Gold, got)
		}
	}
	// A gold whose aliases hold the separator cannot be split.
	pa, _ := mustAgent(t, func() Config { c := DefaultConfig(); c.ScorePerObjective = true; return c }())
	ptr, _ := runScript(t, pa, outs)
	if _, err := ptr.MemorySequences(0, [][]string{{"Paris; France"}, {"Dijon"}}); err == nil {
		t.Fatal("a gold with \"; \" in an alias was split")
	}
	if _, err := GoldText([][]string{{"a"}, {" ", ""}}); err == nil {
		t.Fatal("an objective without alias was accepted")
	}
	// A step without a mem block has no memory reward.
	tr = a.NewTrajectory([]string{"q?"})
	tr.Step(tok.Encode("<think>t</think>"), nil)
	if _, err := tr.MemorySequences(0, [][]string{{"a"}}); err == nil {
		t.Fatal("memory sequences for a step without <mem>")
	}
}

// TestScoreLayout checks the layout's text forms and that New refuses an
// unknown one.
func TestScoreLayout(t *testing.T) {
	for _, l := range []ScoreLayout{ScoreInTurn, ScoreNextStep} {
		if got, err := ParseScoreLayout(" " + strings.ToUpper(l.String())); err != nil || got != l {
			t.Errorf("%v: parsed back as %v, %v", l, got, err)
		}
	}
	if _, err := ParseScoreLayout("memonly"); err == nil || !strings.Contains(err.Error(), `want "turn" or "next-step"`) {
		t.Errorf("unknown layout: %v", err)
	}
	cfg := DefaultConfig()
	if cfg.ScoreLayout != ScoreInTurn {
		t.Errorf("default layout %v", cfg.ScoreLayout)
	}
	cfg.ScoreLayout = 7
	if _, err := New(cfg, newTestTok()); err == nil || !strings.Contains(err.Error(), "score layout") {
		t.Errorf("New with layout 7: %v", err)
	}
}

// TestPrompt checks the task prompt: questions joined with "; ", the k
// count, the memory rule and the override.
func TestPrompt(t *testing.T) {
	a, tok := mustAgent(t, DefaultConfig())
	txt := a.TaskText([]string{" Who? ", "Where?"})
	for _, want := range []string{"Questions: Who?; Where?", "exactly 2 answer(s)", "<search>query</search>", "<mem>", "<think>", "<answer>answer 1; answer 2; ...</answer>", "deletes everything except"} {
		if !strings.Contains(txt, want) {
			t.Errorf("prompt lacks %q", want)
		}
	}
	cfg := DefaultConfig()
	cfg.TaskPrompt = "Solve {k}: {questions} with <{tool}>"
	cfg.SystemPrompt = ""
	a, _ = mustAgent(t, cfg)
	if got := tok.Decode(a.PromptIDs([]string{"x?", "y?"})); got != "<|im_start|>user\nSolve 2: x?; y? with <search><|im_end|>\n" {
		t.Fatalf("override prompt %q", got)
	}
	cfg.TaskPrompt = "no placeholder"
	if _, err := New(cfg, tok); err == nil {
		t.Fatal("override without {questions} accepted")
	}
}

func TestConfigParsing(t *testing.T) {
	for s, want := range map[string]Keep{"all": KeepAll, "ALL": KeepAll, "0": KeepAll, "1": 1, "3": 3} {
		if got, err := ParseKeep(s); err != nil || got != want {
			t.Errorf("ParseKeep(%q) = %d, %v", s, got, err)
		}
	}
	if _, err := ParseKeep("-1"); err == nil {
		t.Error("ParseKeep(-1) accepted")
	}
	if p, err := ParseInvalidPolicy("correct"); err != nil || p != CorrectOnInvalid {
		t.Error("ParseInvalidPolicy(correct)")
	}
	cfg := DefaultConfig()
	cfg.ToolTag = "find"
	if _, err := New(cfg, newTestTok()); err == nil {
		t.Error("tool tag find accepted")
	}
}

// TestCheckRecord: a trajectory's own record passes; a changed context id,
// another keep setting or a bad span is caught.
func TestCheckRecord(t *testing.T) {
	a, tok := mustAgent(t, DefaultConfig())
	tr, _ := runScript(t, a, scriptedOutputs(tok))
	if err := a.CheckRecord(tr.Questions, tr.Steps); err != nil {
		t.Fatal(err)
	}
	steps := append([]StepRecord(nil), tr.Steps...)
	steps[2].ContextIDs = append([]int(nil), steps[2].ContextIDs...)
	steps[2].ContextIDs[40]++
	if err := a.CheckRecord(tr.Questions, steps); err == nil {
		t.Fatal("a changed context id passed")
	}
	cfg := DefaultConfig()
	cfg.Keep = KeepAll
	aAll, _ := mustAgent(t, cfg)
	if err := aAll.CheckRecord(tr.Questions, tr.Steps); err == nil {
		t.Fatal("a keep-1 record passed under keep all")
	}
	steps = append([]StepRecord(nil), tr.Steps...)
	steps[1].MemEnd = len(steps[1].OutputIDs) + 1
	if err := a.CheckRecord(tr.Questions, steps); err == nil {
		t.Fatal("a mem span past the output passed")
	}
}
