package rollout

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/tasks"
)

// The settings file is JSON that any reader can parse, with the strings of
// a lead-in ("<answer>", quotes, newlines) kept as they are; a journal
// under other settings is refused with one line naming the setting.
func TestJournalSettings(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out.parquet.partial")
	set := Settings{"seed": "7", "score_lead_in": "\"Thought\": done.\n<answer>", "group": "2"}
	all := []tasks.Task{{TaskID: "a", K: 1, Questions: []string{"q?"}, Golds: [][]string{{"x"}}}}
	if _, done, err := OpenJournal(dir, set, 2, all); err != nil || len(done) != 0 {
		t.Fatalf("new journal: %v %v", done, err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, journalSettings))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `<answer>`) || !strings.HasPrefix(string(raw), "{\n  \"group\": \"2\",\n") {
		t.Errorf("run.json:\n%s", raw)
	}
	back, err := decodeSettings(raw)
	if err != nil || !reflect.DeepEqual(back, set) {
		t.Errorf("decoded %v, %v; want %v", back, err, set)
	}
	if _, _, err := OpenJournal(dir, set, 2, all); err != nil {
		t.Errorf("same settings: %v", err)
	}
	other := Settings{"seed": "8", "score_lead_in": set["score_lead_in"], "group": "2"}
	_, _, err = OpenJournal(dir, other, 2, all)
	if err == nil || !strings.Contains(err.Error(), `has seed = "7", this one "8"`) || strings.Contains(err.Error(), "\n") {
		t.Errorf("other settings: %v", err)
	}
	os.WriteFile(filepath.Join(dir, journalSettings), []byte("seed: 7\n"), 0o644)
	if _, _, err := OpenJournal(dir, set, 2, all); err == nil || !strings.Contains(err.Error(), "run.json: not a settings object") {
		t.Errorf("bad run.json: %v", err)
	}
}
