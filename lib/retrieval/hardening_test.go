package retrieval

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// copyIndex copies the fixture index directory so a test may damage it.
func copyIndex(t *testing.T) string {
	t.Helper()
	fixtureIndex(t) // builds it once
	dst := filepath.Join(t.TempDir(), "index")
	if err := os.CopyFS(dst, os.DirFS(fixtureIndexOnce.dir)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func truncateHalf(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// dropFiles rewrites index.json without its "files" sizes and checksums, as
// an index written before they existed.
func dropFiles(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, ManifestFile)
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "files")
	raw, _ = json.Marshal(m)
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A short, long or damaged index file is found at open, with its name.
func TestOpenFindsDamagedFiles(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   string
	}{
		{"truncated postings", func(t *testing.T, dir string) { truncateHalf(t, filepath.Join(dir, bm25PostFile)) }, "bm25.post: "},
		{"postings one byte longer", func(t *testing.T, dir string) {
			f, _ := os.OpenFile(filepath.Join(dir, bm25PostFile), os.O_APPEND|os.O_WRONLY, 0)
			f.Write([]byte{0})
			f.Close()
		}, "index.json records"},
		{"flipped posting byte", func(t *testing.T, dir string) {
			p := filepath.Join(dir, bm25PostFile)
			raw, _ := os.ReadFile(p)
			raw[len(raw)/3] ^= 0x55
			os.WriteFile(p, raw, 0o644)
		}, "bm25.post: checksum"},
		{"truncated docstore", func(t *testing.T, dir string) { truncateHalf(t, filepath.Join(dir, docstoreFile)) }, "docs.sqlite: "},
		{"missing faiss file", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, denseFile)) }, "dense.faiss: "},
		{"truncated lengths", func(t *testing.T, dir string) { truncateHalf(t, filepath.Join(dir, bm25LenFile)) }, "bm25.len: "},
		// Without the recorded sizes (an older index.json) the lexicon walk
		// still finds postings past the end of the file.
		{"truncated postings, old manifest", func(t *testing.T, dir string) {
			dropFiles(t, dir)
			truncateHalf(t, filepath.Join(dir, bm25PostFile))
		}, "past the end of bm25.post"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyIndex(t)
			c.damage(t, dir)
			ix, err := Open(dir)
			if err == nil {
				ix.Close()
				t.Fatalf("Open succeeded on a damaged index")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("error %q: want it to name the file (%q)", err, c.want)
			}
		})
	}
	// The undamaged copy opens, and Verify passes over every file.
	ix, err := Open(copyIndex(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if len(ix.Manifest.Files) < 5 {
		t.Fatalf("index.json lists %d files, want docstore, three BM25 files and dense.faiss", len(ix.Manifest.Files))
	}
	if err := ix.Verify(); err != nil {
		t.Fatal(err)
	}
}

// Verify finds a damaged docstore byte that Open (sizes only) lets through.
func TestVerifyFindsDamagedDocstore(t *testing.T) {
	dir := copyIndex(t)
	p := filepath.Join(dir, docstoreFile)
	raw, _ := os.ReadFile(p)
	raw[len(raw)-10] ^= 0xff
	os.WriteFile(p, raw, 0o644)
	ix, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Verify(); err == nil || !strings.Contains(err.Error(), "docs.sqlite: checksum") {
		t.Fatalf("Verify: %v, want a docs.sqlite checksum error", err)
	}
}

type panickingEncoder struct{}

func (panickingEncoder) Dim() int { return 32 }
func (panickingEncoder) Encode(context.Context, []string) ([][]float32, error) {
	panic("encoder bug")
}

// A panic in the search answers its request with a 500; the server keeps
// answering the next ones.
func TestSearchPanicIs500(t *testing.T) {
	ix := fixtureIndex(t)
	_, hs := newTestServer(t, ix, ServerConfig{Encoder: panickingEncoder{}})
	code, _, body := post(t, hs.URL, `{"queries": ["q"], "method": "dense"}`)
	if code != 500 || !strings.Contains(string(body), "encoder bug") {
		t.Fatalf("got %d %s, want a 500 naming the panic", code, body)
	}
	for i := 0; i < 3; i++ {
		if code, _, body := post(t, hs.URL, `{"queries": ["album"]}`); code != 200 {
			t.Fatalf("after the panic: %d %s", code, body)
		}
	}
}

// startServer runs ListenAndServe in the background and returns its
// address, the function that stops it (SIGTERM) and its result.
func startServer(t *testing.T, cfg ServerConfig, grace time.Duration) (string, context.CancelFunc, chan error) {
	t.Helper()
	ix := fixtureIndex(t)
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- ListenAndServe(ctx, "127.0.0.1:0", ix, cfg, grace, nil, func(a net.Addr) { addrc <- a.String() })
	}()
	t.Cleanup(cancel)
	return <-addrc, cancel, done
}

// partialRequest sends the headers of a POST and part of its body.
func partialRequest(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"queries\":")
	return c
}

// A client that stops halfway through its body is answered 408 once the
// read timeout passes, and its connection is closed.
func TestSlowBodyTimesOut(t *testing.T) {
	addr, _, _ := startServer(t, ServerConfig{ReadTimeout: 300 * time.Millisecond}, time.Second)
	c := partialRequest(t, addr)
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("got %d, want 408", resp.StatusCode)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("answered after %v, the read timeout is 300ms", d)
	}
}

// SIGTERM is not held by clients stalled in their body: with a 30 s grace
// and a 60 s read timeout, shutdown ends at once.
func TestShutdownNotHeldBySlowBodies(t *testing.T) {
	addr, stop, done := startServer(t, ServerConfig{ReadTimeout: time.Minute}, 30*time.Second)
	var conns []net.Conn
	for i := 0; i < 50; i++ {
		conns = append(conns, partialRequest(t, addr))
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	time.Sleep(200 * time.Millisecond) // the handlers are reading the bodies
	start := time.Now()
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ListenAndServe: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("shutdown still waiting after 5s on 50 stalled bodies")
	}
	t.Logf("shutdown with 50 stalled bodies took %v", time.Since(start))
}

// At most MaxConns connections are served at once; the next client is
// served when one closes.
func TestConnectionCap(t *testing.T) {
	addr, _, _ := startServer(t, ServerConfig{MaxConns: 2}, time.Second)
	var held []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	time.Sleep(100 * time.Millisecond)
	got := make(chan int, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/health")
		if err != nil {
			got <- -1
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	select {
	case code := <-got:
		t.Fatalf("a third connection was served (%d) while two were open; the cap is 2", code)
	case <-time.After(300 * time.Millisecond):
	}
	held[0].Close()
	select {
	case code := <-got:
		if code != 200 {
			t.Fatalf("health: %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting client was not served after a connection closed")
	}
	held[1].Close()
}
