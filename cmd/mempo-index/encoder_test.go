package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/testenv"
)

const encoderModel = "../../testdata/encoder/model"

// encoderCorpus writes the 200 passages of the encoder fixture, without
// their "passage: " prefix (the e5 family adds it), as a corpus.
func encoderCorpus(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile("../../testdata/encoder/texts.json")
	if err != nil {
		t.Fatal(err)
	}
	var tx struct{ Passages []string }
	json.Unmarshal(data, &tx)
	var buf bytes.Buffer
	for i, p := range tx.Passages {
		b, _ := json.Marshal(map[string]string{"id": fmt.Sprint(i), "contents": strings.TrimPrefix(p, "passage: ")})
		buf.Write(append(b, '\n'))
	}
	return write(t, filepath.Join(dir, "corpus.jsonl"), buf.String())
}

// mempo-index --encoder embeds the corpus and builds the dense index; run
// again over the file a killed run left (whole chunks, a half-written one,
// the sidecar not marked complete), it resumes at the last whole chunk and
// writes the same embeddings.
func TestEncoderIndexAndResume(t *testing.T) {
	dir := t.TempDir()
	corpus := encoderCorpus(t, dir)
	// --device cpu: the embeddings are compared byte for byte (auto would
	// take a GPU's fp16 forward, whose bits may depend on the batch shapes).
	args := []string{"--corpus", corpus, "--encoder", encoderModel, "--encoder-family", "e5", "--max-length", "64", "--embed-chunk", "64",
		"--device", "cpu"}
	code, out := run(t, append(args, "--out", filepath.Join(dir, "ix"))...)
	if code != 0 || !strings.Contains(out, "embedded 200 passages (0 kept from an earlier run)") || !strings.Contains(out, "dense 200×64") ||
		!strings.Contains(out, `family e5`) || !strings.Contains(out, `passage prefix "passage: "`) {
		t.Fatalf("exit %d: %s", code, out)
	}
	full, err := os.ReadFile(filepath.Join(dir, "ix.embeddings.npy"))
	if err != nil {
		t.Fatal(err)
	}
	rowBytes := 64 * 4
	partial := filepath.Join(dir, "partial.npy")
	os.WriteFile(partial, full[:128+150*rowBytes+5], 0o644)
	meta, _ := os.ReadFile(filepath.Join(dir, "ix.embeddings.npy.json"))
	os.WriteFile(partial+".json", bytes.Replace(meta, []byte(`"complete": true`), []byte(`"complete": false`), 1), 0o644)
	code, out = run(t, append(args, "--out", filepath.Join(dir, "ix2"), "--embeddings-out", partial)...)
	if code != 0 || !strings.Contains(out, "resuming "+partial+" at row 128") || !strings.Contains(out, "(128 kept from an earlier run)") {
		t.Fatalf("exit %d: %s", code, out)
	}
	got, _ := os.ReadFile(partial)
	if !bytes.Equal(got, full) {
		t.Fatal("resumed embeddings differ from an uninterrupted run's")
	}
}

func TestEncoderBadInput(t *testing.T) {
	dir := t.TempDir()
	corpus := encoderCorpus(t, dir)
	qwen := filepath.Join(dir, "qwen")
	os.Mkdir(qwen, 0o755)
	write(t, filepath.Join(qwen, "config.json"), `{"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 64}`)
	code, out := run(t, "--corpus", corpus, "--out", filepath.Join(dir, "ix"), "--encoder", qwen)
	oneLine(t, code, out, `is not a BertModel`)
	code, out = run(t, "--corpus", corpus, "--out", filepath.Join(dir, "ix"), "--encoder", encoderModel, "--embeddings", "x.npy")
	oneLine(t, code, out, "--encoder excludes --embeddings")
	code, out = run(t, "--corpus", corpus, "--out", filepath.Join(dir, "ix"), "--query-prefix", "q: ")
	oneLine(t, code, out, "--query-prefix needs --encoder")
	if _, err := os.Stat(filepath.Join(dir, "ix")); err == nil {
		t.Error("a failed run left an index")
	}
}

// A real kill: mempo-index --encoder is SIGKILLed while it embeds; the
// same command run again resumes from what is on disk, and its embeddings
// equal an uninterrupted run's byte for byte.
func TestEncoderKillAndResume(t *testing.T) {
	dir := t.TempDir()
	one, err := os.ReadFile(encoderCorpus(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	// 2,400 passages (the fixture's 200, 12 times): a few seconds to embed.
	var buf bytes.Buffer
	row := 0
	for r := 0; r < 12; r++ {
		for _, line := range strings.Split(strings.TrimSpace(string(one)), "\n") {
			var p map[string]string
			json.Unmarshal([]byte(line), &p)
			p["id"] = fmt.Sprint(row)
			row++
			b, _ := json.Marshal(p)
			buf.Write(append(b, '\n'))
		}
	}
	corpus := write(t, filepath.Join(dir, "big.jsonl"), buf.String())
	args := func(out string) []string {
		return []string{"--corpus", corpus, "--out", out, "--encoder", encoderModel, "--encoder-family", "e5", "--device", "cpu",
			"--max-length", "64", "--embed-chunk", "32", "--embeddings-out", filepath.Join(dir, "emb.npy")}
	}
	cmd := testenv.Command(asMain, args(filepath.Join(dir, "ix"))...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill once a few chunks are on disk.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if st, err := os.Stat(filepath.Join(dir, "emb.npy")); err == nil && st.Size() > 128+4*32*64*4 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("no embeddings written after 30 s")
		}
		time.Sleep(time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	st, _ := os.Stat(filepath.Join(dir, "emb.npy"))
	if st.Size() >= 128+2400*64*4 {
		t.Skip("the run finished before the kill landed")
	}
	code, out := run(t, args(filepath.Join(dir, "ix"))...)
	if code != 0 || !strings.Contains(out, "resuming") || !strings.Contains(out, "embedded 2400 passages") {
		t.Fatalf("exit %d: %s", code, out)
	}
	t.Logf("killed at %d bytes; %s", st.Size(), strings.Split(out, "\n")[1])
	resumed, _ := os.ReadFile(filepath.Join(dir, "emb.npy"))
	a := args(filepath.Join(dir, "ix2"))
	a[len(a)-1] = filepath.Join(dir, "emb2.npy")
	if code, out := run(t, a...); code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	whole, _ := os.ReadFile(filepath.Join(dir, "emb2.npy"))
	if !bytes.Equal(resumed, whole) {
		t.Fatal("embeddings after kill and resume differ from an uninterrupted run's")
	}
}
