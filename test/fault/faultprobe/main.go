// Command faultprobe is the fault table's HTTP client for mempo-serve
// (test/fault): stalled bodies, SIGTERM under them, and the soak.
//
//	faultprobe retrieve ADDR QUERY [N]          N requests (default 1); exit 1 unless all are 200
//	faultprobe slowbody ADDR CONNS WITHIN       CONNS requests stalled mid-body; exit 1 unless the server
//	                                            answers or closes each within WITHIN
//	faultprobe sigterm ADDR PID CONNS WITHIN    the same stalled requests, then SIGTERM to PID; exit 1
//	                                            unless the server is gone within WITHIN
//	faultprobe soak ADDR PID QUESTIONS CLIENTS DURATION
//	                                            CLIENTS keep-alive clients for DURATION; prints requests/s,
//	                                            p50/p99 and the server's RSS; exit 1 on any error or an RSS
//	                                            that keeps growing
//	faultprobe nan-weights FILE.safetensors     set the first value of the first layer tensor to NaN
//	faultprobe npy FILE ROWS DIM                write a float32 .npy matrix of ROWS×DIM
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: faultprobe retrieve|slowbody|sigterm|soak ...")
	}
	a := os.Args[2:]
	switch os.Args[1] {
	case "retrieve":
		n := 1
		if len(a) > 2 {
			n = atoi(a[2])
		}
		retrieve(a[0], a[1], n)
	case "slowbody":
		slowBody(a[0], atoi(a[1]), dur(a[2]))
	case "sigterm":
		sigterm(a[0], atoi(a[1]), atoi(a[2]), dur(a[3]))
	case "soak":
		soak(a[0], atoi(a[1]), a[2], atoi(a[3]), dur(a[4]))
	case "nan-weights":
		nanWeights(a[0])
	case "npy":
		writeNPY(a[0], atoi(a[1]), atoi(a[2]))
	default:
		fail("unknown subcommand " + os.Args[1])
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "faultprobe: "+msg)
	os.Exit(1)
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fail(err.Error())
	}
	return n
}

func dur(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		fail(err.Error())
	}
	return d
}

func body(q string) []byte {
	b, _ := json.Marshal(map[string]any{"queries": []string{q}, "topk": 3, "return_scores": true})
	return b
}

func retrieve(addr, q string, n int) {
	codes := map[int]int{}
	for i := 0; i < n; i++ {
		resp, err := http.Post("http://"+addr+"/retrieve", "application/json", bytes.NewReader(body(q)))
		if err != nil {
			codes[-1]++
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
	fmt.Printf("statuses: %v\n", codes)
	if codes[200] != n {
		fail(fmt.Sprintf("%d of %d requests answered 200", codes[200], n))
	}
}

// stall opens n connections that send headers announcing a 100-byte body
// and then only 11 bytes of it.
func stall(addr string, n int) []net.Conn {
	var conns []net.Conn
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			fail(fmt.Sprintf("connection %d: %v", i, err))
		}
		fmt.Fprintf(c, "POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"queries\":")
		conns = append(conns, c)
	}
	return conns
}

// waitClosed waits until every connection got an answer or was closed by
// the server, up to deadline; it returns how many did and their statuses.
func waitClosed(conns []net.Conn, deadline time.Time) (int, map[string]int) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	ended := 0
	got := map[string]int{}
	for _, c := range conns {
		wg.Add(1)
		go func(c net.Conn) {
			defer wg.Done()
			c.SetReadDeadline(deadline)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ended++
				got[strconv.Itoa(resp.StatusCode)]++
			case isTimeout(err):
				got["open"]++
			default:
				ended++
				got["closed"]++
			}
		}(c)
	}
	wg.Wait()
	return ended, got
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func slowBody(addr string, n int, within time.Duration) {
	conns := stall(addr, n)
	start := time.Now()
	ended, got := waitClosed(conns, start.Add(within))
	fmt.Printf("%d stalled requests: %v after %.1fs\n", n, got, time.Since(start).Seconds())
	if ended != n {
		fail(fmt.Sprintf("%d of %d stalled requests still open after %v", n-ended, n, within))
	}
}

func sigterm(addr string, pid, n int, within time.Duration) {
	conns := stall(addr, n)
	time.Sleep(300 * time.Millisecond) // the handlers are reading the bodies
	start := time.Now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		fail(err.Error())
	}
	for time.Since(start) < within {
		if !alive(pid) {
			fmt.Printf("server exited %.2fs after SIGTERM with %d stalled requests\n", time.Since(start).Seconds(), n)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	fail(fmt.Sprintf("server still running %v after SIGTERM, held by %d stalled requests", within, n))
	_ = conns
}

// alive reports a process that exists and is not a zombie.
func alive(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func rssMB(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return kb / 1024
		}
	}
	return -1
}

// questions reads "question" (or else "contents") of each JSONL line.
func questions(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		fail(err.Error())
	}
	defer f.Close()
	var qs []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var row struct{ Question, Contents string }
		if json.Unmarshal(sc.Bytes(), &row) != nil {
			continue
		}
		q := row.Question
		if q == "" {
			q = row.Contents
			if len(q) > 80 {
				q = q[:80]
			}
		}
		if q != "" {
			qs = append(qs, q)
		}
	}
	if len(qs) == 0 {
		fail(path + ": no questions")
	}
	return qs
}

func soak(addr string, pid int, qfile string, clients int, d time.Duration) {
	qs := questions(qfile)
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	cl := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var errs, n atomic.Int64
	var firstErr atomic.Value
	lat := make([][]time.Duration, clients)
	var rss []float64
	stop := make(chan struct{})
	var mon sync.WaitGroup
	mon.Add(1)
	go func() {
		defer mon.Done()
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				rss = append(rss, rssMB(pid))
			}
		}
	}()
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := c; time.Now().Before(end); i += clients {
				t0 := time.Now()
				resp, err := cl.Post("http://"+addr+"/retrieve", "application/json", bytes.NewReader(body(qs[i%len(qs)])))
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				n.Add(1)
				lat[c] = append(lat[c], time.Since(t0))
			}
		}(c)
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	close(stop)
	mon.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(p*float64(len(all))))].Microseconds()) / 1000
	}
	load, _ := os.ReadFile("/proc/loadavg")
	lo, hi := 1e18, 0.0
	for _, r := range rss {
		lo, hi = min(lo, r), max(hi, r)
	}
	// RSS in the last third against the first third: a leak grows steadily.
	third := max(len(rss)/3, 1)
	early, late := 0.0, 0.0
	for _, r := range rss[:third] {
		early = max(early, r)
	}
	for _, r := range rss[len(rss)-third:] {
		late = max(late, r)
	}
	fmt.Printf("soak: %d clients, %.0fs: %d requests, %.0f requests/s, p50 %.1f ms, p99 %.1f ms, errors %d; RSS %.0f–%.0f MB (first third max %.0f, last third max %.0f); load average %s",
		clients, secs, n.Load(), float64(n.Load())/secs, pct(0.5), pct(0.99), errs.Load(), lo, hi, early, late, load)
	if errs.Load() > 0 {
		fail(fmt.Sprintf("%d errors, the first: %v", errs.Load(), firstErr.Load()))
	}
	if late > 1.5*early+16 {
		fail(fmt.Sprintf("RSS grew from %.0f MB to %.0f MB during the soak", early, late))
	}
}

func nanWeights(path string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		fail(err.Error())
	}
	n := binary.LittleEndian.Uint64(raw)
	var h map[string]json.RawMessage
	if err := json.Unmarshal(raw[8:8+n], &h); err != nil {
		fail(err.Error())
	}
	names := make([]string, 0, len(h))
	for k := range h {
		if strings.Contains(k, "layers.0.") {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		fail(path + ": no layer tensors")
	}
	var t struct {
		Dtype   string   `json:"dtype"`
		Offsets [2]int64 `json:"data_offsets"`
	}
	json.Unmarshal(h[names[0]], &t)
	if t.Dtype != "F32" {
		fail(path + ": want F32 weights")
	}
	off := 8 + int64(n) + t.Offsets[0]
	binary.LittleEndian.PutUint32(raw[off:], math.Float32bits(float32(math.NaN())))
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		fail(err.Error())
	}
	fmt.Printf("%s: %s[0] = NaN\n", path, names[0])
}

func writeNPY(path string, rows, dim int) {
	hdr := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", rows, dim)
	for (10+len(hdr)+1)%64 != 0 {
		hdr += " "
	}
	hdr += "\n"
	var b bytes.Buffer
	b.WriteString("\x93NUMPY\x01\x00")
	binary.Write(&b, binary.LittleEndian, uint16(len(hdr)))
	b.WriteString(hdr)
	for i := 0; i < rows*dim; i++ {
		binary.Write(&b, binary.LittleEndian, float32(math.Sin(float64(i))))
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		fail(err.Error())
	}
}
