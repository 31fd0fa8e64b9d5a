package tasks

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// searchR1Prefix is Search-R1's make_prefix text (template_type "base",
// scripts/data_process/nq_search.py), verbatim.
func searchR1Prefix(q string) string {
	return "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get new information. " +
		"After reasoning, if you find you lack some knowledge, you can call a search engine by <search> query </search> and it will return the top searched results between <information> and </information>. " +
		"You can search as many times as your want. If you find no further external knowledge needed, you can directly provide the answer inside <answer> and </answer>, without detailed illustrations. " +
		"For example, <answer> Beijing </answer>. Question: " + q + "\n"
}

// testdata/tasks/searchr1-train.parquet holds 24 NQ and 24 HotpotQA
// questions in the layout of Search-R1's own data script, the question only
// inside the prompt (written by scripts/searchr1fixture from ../shared/data).
func TestSearchR1PromptOnlyParquet(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "tasks", "searchr1-train.parquet")
	got, direct, err := ReadFile(path, "auto", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(direct) != 0 || len(got) != 48 {
		t.Fatalf("%d questions, %d tasks; want 48 questions", len(got), len(direct))
	}
	first := map[string]Question{}
	for _, q := range got {
		if strings.Contains(q.Question, "Question:") || strings.Contains(q.Question, "\n") || !strings.HasSuffix(q.Question, "?") {
			t.Fatalf("question %q is not clean", q.Question)
		}
		if _, ok := first[q.Source]; !ok {
			first[q.Source] = q
		}
	}
	// NQ's 501st question and HotpotQA train's first, as the source files
	// have them (Search-R1 appends the "?").
	want := map[string]Question{
		"nq":       {Source: "nq", ID: "0", Question: "where did they get the vibranium to make captain americas shield?", Golds: []string{"Wakanda"}},
		"hotpotqa": {Source: "hotpotqa", ID: "0", Question: "Party Never Ends is an album by the Romanian singer who studied at what college?", Golds: []string{"Ovidius University"}},
	}
	if !reflect.DeepEqual(first, want) {
		t.Fatalf("first questions %+v\nwant %+v", first, want)
	}
	ts, err := Build(got, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 24 || ts[0].K != 2 || !strings.HasPrefix(ts[0].Prompt, want["nq"].Question+"; ") {
		t.Fatalf("%d tasks, first %+v", len(ts), ts[0])
	}
}

func TestQuestionFromPrompt(t *testing.T) {
	chat := func(msgs ...[2]string) []any {
		var out []any
		for _, m := range msgs {
			out = append(out, map[string]any{"role": m[0], "content": m[1]})
		}
		return out
	}
	mem1 := "You will answer multiple complex questions using iterative reasoning, summarization, and web search.\n" +
		"- If all questions are answered, provide the final answers within <answer> answer1; answer2; ... </answer>.\n" +
		"Answer the following questions: who is a?; where is b?\n"
	for _, c := range []struct {
		prompt any
		want   string
	}{
		{chat([2]string{"user", searchR1Prefix("who wrote hamlet?")}), "who wrote hamlet?"},
		// verl's variant: a system message first.
		{chat([2]string{"system", "You are a helpful and harmless assistant."}, [2]string{"user", searchR1Prefix("q one?")}), "q one?"},
		{searchR1Prefix("plain string prompt?"), "plain string prompt?"},
		{chat([2]string{"user", mem1}), "who is a?; where is b?"},
		// Few-shot: the real question is the last one.
		{"Question: example?\nAnswer: x\nQuestion: the real one?\n", "the real one?"},
		// A generation cue after the question, a chat end marker.
		{"Questions: q1?; q2?\nAssistant: <think>", "q1?; q2?"},
		{"Question: cut here?<|im_end|>\n", "cut here?"},
		// The Agentic-RAG rows: the user message is the question itself.
		{chat([2]string{"user", "Were Scott Derrickson and Ed Wood of the same nationality?"}), "Were Scott Derrickson and Ed Wood of the same nationality?"},
	} {
		got, err := QuestionFromPrompt(c.prompt)
		if err != nil || got != c.want {
			t.Errorf("prompt %q: got %q, %v; want %q", c.prompt, got, err, c.want)
		}
	}
	for _, bad := range []any{
		chat([2]string{"user", "Use <search> q </search> to search, then answer."}),
		"Question:   \n",
		[]any{},
		[]any{"not a message"},
		3.0,
	} {
		if q, err := QuestionFromPrompt(bad); err == nil {
			t.Errorf("prompt %q: got %q, want an error", bad, q)
		}
	}
}

func TestPromptErrorSaysWhatWasLookedFor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(path, []byte(`{"prompt":[{"role":"user","content":"Think in <think> tags and answer."}],"reward_model":{"ground_truth":{"target":["x"]}}}`+"\n"), 0o644)
	_, _, err := ReadFile(path, "auto", "x")
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{`bad.jsonl: row 1: field "prompt"`, `"question"`, `extra_info.question`, `Question: …`, `Answer the following questions: …`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
