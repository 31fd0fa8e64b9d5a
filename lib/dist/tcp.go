package dist

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unsafe"
)

// SetupTimeout bounds how long Join waits for every rank to connect.
var SetupTimeout = 5 * time.Minute

const magic = "MEMPODP1"

// The collectives, as tagged in a frame: a rank that calls another
// collective than rank 0 is stopped with an error rather than garbage.
const (
	opAllReduce byte = iota + 1
	opReduceScatter
	opAllGather
	opBroadcast
	opExchange
)

var opNames = map[byte]string{opAllReduce: "all-reduce", opReduceScatter: "reduce-scatter",
	opAllGather: "all-gather", opBroadcast: "broadcast", opExchange: "exchange"}

// tcpComm is a star: ranks 1..n−1 each hold one connection to rank 0,
// which receives every contribution, combines them in rank order and sends
// each rank its result.
type tcpComm struct {
	rank, size int
	seq        uint32
	ln         net.Listener
	peers      []*peer // rank 0: peers[r] for r ≥ 1; others: peers[0] is rank 0
}

type peer struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func newPeer(c net.Conn) *peer {
	return &peer{c: c, r: bufio.NewReaderSize(c, 1<<20), w: bufio.NewWriterSize(c, 1<<20)}
}

// DialTCP joins the run: rank 0 listens (on e.Addr's port, or on a free
// port it writes into e.File), the others connect to it.
func DialTCP(e Env) (Comm, error) {
	c := &tcpComm{rank: e.Rank, size: e.Size}
	deadline := time.Now().Add(SetupTimeout)
	if e.Rank == 0 {
		if err := c.listen(e, deadline); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	if err := c.dial(e, deadline); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *tcpComm) listen(e Env, deadline time.Time) error {
	addr := ":0"
	if e.File == "" {
		_, port, err := net.SplitHostPort(e.Addr)
		if err != nil {
			return fmt.Errorf("dist: address %q: %v", e.Addr, err)
		}
		addr = ":" + port
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("dist: rank 0 cannot listen on %s: %v", addr, err)
	}
	c.ln = ln
	if e.File != "" {
		host := os.Getenv("MASTER_ADDR")
		if host == "" {
			if host, err = os.Hostname(); err != nil {
				return err
			}
		}
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		if err := writeAtomic(e.File, net.JoinHostPort(host, port)+"\n"); err != nil {
			return fmt.Errorf("dist: %s: %v", e.File, err)
		}
	}
	c.peers = make([]*peer, e.Size)
	if tl, ok := ln.(*net.TCPListener); ok {
		tl.SetDeadline(deadline)
	}
	for n := 1; n < e.Size; {
		conn, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("dist: rank 0 waited for %d of %d ranks until the timeout (%v): %v", e.Size-n, e.Size-1, SetupTimeout, err)
		}
		p := newPeer(conn)
		conn.SetDeadline(deadline)
		var hello [len(magic) + 8]byte
		if _, err := io.ReadFull(p.r, hello[:]); err != nil || string(hello[:len(magic)]) != magic {
			conn.Close() // not one of ours (a port scan, a stale client)
			continue
		}
		r := int(binary.LittleEndian.Uint32(hello[len(magic):]))
		s := int(binary.LittleEndian.Uint32(hello[len(magic)+4:]))
		switch {
		case s != e.Size:
			conn.Close()
			return fmt.Errorf("dist: rank %d says WORLD_SIZE=%d, rank 0 has %d", r, s, e.Size)
		case r < 1 || r >= e.Size || c.peers[r] != nil:
			conn.Close()
			return fmt.Errorf("dist: a second rank %d joined (WORLD_SIZE=%d)", r, e.Size)
		}
		if _, err := conn.Write([]byte{1}); err != nil {
			return fmt.Errorf("dist: rank %d: %v", r, err)
		}
		conn.SetDeadline(time.Time{})
		c.peers[r] = p
		n++
	}
	return nil
}

func (c *tcpComm) dial(e Env, deadline time.Time) error {
	wait := 20 * time.Millisecond
	var last error
	for time.Now().Before(deadline) {
		addr := e.Addr
		if e.File != "" {
			b, err := os.ReadFile(e.File)
			if err != nil {
				last = err
				time.Sleep(wait)
				continue
			}
			addr = strings.TrimSpace(string(b))
		}
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			last = err
			time.Sleep(wait)
			wait = min(2*wait, time.Second)
			continue
		}
		conn.SetDeadline(deadline)
		hello := append([]byte(magic), 0, 0, 0, 0, 0, 0, 0, 0)
		binary.LittleEndian.PutUint32(hello[len(magic):], uint32(e.Rank))
		binary.LittleEndian.PutUint32(hello[len(magic)+4:], uint32(e.Size))
		var ok [1]byte
		if _, err := conn.Write(hello); err != nil {
			return fmt.Errorf("dist: rank %d: %v", e.Rank, err)
		}
		if _, err := io.ReadFull(conn, ok[:]); err != nil {
			// A stale address file can point at another run's port.
			conn.Close()
			last = fmt.Errorf("rank 0 at %s refused this rank (%v)", addr, err)
			time.Sleep(wait)
			continue
		}
		conn.SetDeadline(time.Time{})
		c.peers = []*peer{newPeer(conn)}
		return nil
	}
	where := e.Addr
	if e.File != "" {
		where = "the address in " + e.File
	}
	return fmt.Errorf("dist: rank %d could not reach rank 0 at %s within %v: %v", e.Rank, where, SetupTimeout, last)
}

func writeAtomic(path, s string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".dist-*")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(s); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func (c *tcpComm) Rank() int { return c.rank }
func (c *tcpComm) Size() int { return c.size }

func (c *tcpComm) Close() error {
	for _, p := range c.peers {
		if p != nil {
			p.c.Close()
		}
	}
	if c.ln != nil {
		c.ln.Close()
	}
	return nil
}

// A frame: op, sequence number, payload length, payload.
func writeFrame(p *peer, op byte, seq uint32, payload []byte) error {
	var h [13]byte
	h[0] = op
	binary.LittleEndian.PutUint32(h[1:], seq)
	binary.LittleEndian.PutUint64(h[5:], uint64(len(payload)))
	if _, err := p.w.Write(h[:]); err != nil {
		return err
	}
	if _, err := p.w.Write(payload); err != nil {
		return err
	}
	return p.w.Flush()
}

func readFrame(p *peer, op byte, seq uint32, buf []byte) ([]byte, error) {
	var h [13]byte
	if _, err := io.ReadFull(p.r, h[:]); err != nil {
		return nil, err
	}
	gotSeq := binary.LittleEndian.Uint32(h[1:])
	if h[0] != op || gotSeq != seq {
		return nil, fmt.Errorf("out of step: it sent %s #%d, this rank is at %s #%d", opNames[h[0]], gotSeq, opNames[op], seq)
	}
	n := binary.LittleEndian.Uint64(h[5:])
	if uint64(cap(buf)) >= n {
		buf = buf[:n]
	} else {
		buf = make([]byte, n)
	}
	_, err := io.ReadFull(p.r, buf)
	return buf, err
}

func lost(r int, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("dist: rank %d left the run (connection closed)", r)
	}
	return fmt.Errorf("dist: rank %d: %v", r, err)
}

// round is one collective. Every rank sends payload; rank 0 passes each
// rank's payload, in rank order, to take (its own first), then sends rank
// r reply(r). The result is this rank's reply.
func (c *tcpComm) round(op byte, payload []byte, take func(r int, p []byte) error, reply func(r int) []byte) ([]byte, error) {
	c.seq++
	if c.rank != 0 {
		if err := writeFrame(c.peers[0], op, c.seq, payload); err != nil {
			return nil, lost(0, err)
		}
		res, err := readFrame(c.peers[0], op, c.seq, nil)
		if err != nil {
			return nil, lost(0, err)
		}
		return res, nil
	}
	if err := take(0, payload); err != nil {
		return nil, err
	}
	var buf []byte
	for r := 1; r < c.size; r++ {
		p, err := readFrame(c.peers[r], op, c.seq, buf)
		if err != nil {
			return nil, lost(r, err)
		}
		if err := take(r, p); err != nil {
			return nil, err
		}
		buf = p
	}
	for r := 1; r < c.size; r++ {
		if err := writeFrame(c.peers[r], op, c.seq, reply(r)); err != nil {
			return nil, lost(r, err)
		}
	}
	return reply(0), nil
}

func f32bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

func bytesf32(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func sizeErr(what string, r, got, want int) error {
	return fmt.Errorf("dist: %s: rank %d gave %d values, rank 0 %d", what, r, got, want)
}

// summer is rank 0's take of a sum: rank 0's values, then + rank 1's, …
// in float32, the contributions arriving in rank order.
func summer(what string, n int, sum *[]float32) func(r int, p []byte) error {
	return func(r int, p []byte) error {
		v := bytesf32(p)
		if len(v) != n {
			return sizeErr(what, r, len(v), n)
		}
		if r == 0 {
			*sum = append([]float32(nil), v...)
			return nil
		}
		s := *sum
		for i, x := range v {
			s[i] += x
		}
		return nil
	}
}

func (c *tcpComm) AllReduce(buf []float32) error {
	var sum []float32
	res, err := c.round(opAllReduce, f32bytes(buf), summer("all-reduce", len(buf), &sum), func(int) []byte { return f32bytes(sum) })
	if err != nil {
		return err
	}
	if v := bytesf32(res); len(v) != len(buf) {
		return fmt.Errorf("dist: all-reduce: rank 0 sent %d values, this rank has %d", len(v), len(buf))
	} else if c.rank != 0 {
		copy(buf, v)
	} else {
		copy(buf, sum)
	}
	return nil
}

func (c *tcpComm) ReduceScatter(in, out []float32) error {
	if len(in) != c.size*len(out) {
		return fmt.Errorf("dist: reduce-scatter of %d values into %d on %d ranks", len(in), len(out), c.size)
	}
	var sum []float32
	n := len(out)
	res, err := c.round(opReduceScatter, f32bytes(in), summer("reduce-scatter", len(in), &sum), func(r int) []byte { return f32bytes(sum[r*n : (r+1)*n]) })
	if err != nil {
		return err
	}
	if v := bytesf32(res); len(v) != n {
		return fmt.Errorf("dist: reduce-scatter: rank 0 sent %d values, want %d", len(v), n)
	} else {
		copy(out, v)
	}
	return nil
}

func (c *tcpComm) AllGather(in, out []float32) error {
	if len(out) != c.size*len(in) {
		return fmt.Errorf("dist: all-gather of %d values into %d on %d ranks", len(in), len(out), c.size)
	}
	var all []float32
	n := len(in)
	res, err := c.round(opAllGather, f32bytes(in), func(r int, p []byte) error {
		v := bytesf32(p)
		if len(v) != n {
			return sizeErr("all-gather", r, len(v), n)
		}
		all = append(all, v...)
		return nil
	}, func(int) []byte { return f32bytes(all) })
	if err != nil {
		return err
	}
	if v := bytesf32(res); len(v) != len(out) {
		return fmt.Errorf("dist: all-gather: rank 0 sent %d values, want %d", len(v), len(out))
	} else {
		copy(out, v)
	}
	return nil
}

func (c *tcpComm) Broadcast(buf []float32, root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("dist: broadcast from rank %d of %d", root, c.size)
	}
	var payload []byte
	if c.rank == root {
		payload = f32bytes(buf)
	}
	var got []byte
	res, err := c.round(opBroadcast, payload, func(r int, p []byte) error {
		if r == root {
			if len(p) != 4*len(buf) {
				return sizeErr("broadcast", r, len(p)/4, len(buf))
			}
			got = append([]byte(nil), p...)
		}
		return nil
	}, func(int) []byte { return got })
	if err != nil {
		return err
	}
	if len(res) != 4*len(buf) {
		return fmt.Errorf("dist: broadcast: got %d values, this rank has %d", len(res)/4, len(buf))
	}
	copy(f32bytes(buf), res)
	return nil
}

func (c *tcpComm) Exchange(b []byte) ([][]byte, error) {
	var packed []byte
	res, err := c.round(opExchange, b, func(r int, p []byte) error {
		packed = binary.LittleEndian.AppendUint64(packed, uint64(len(p)))
		packed = append(packed, p...)
		return nil
	}, func(int) []byte { return packed })
	if err != nil {
		return nil, err
	}
	out := make([][]byte, 0, c.size)
	for len(res) >= 8 {
		n := binary.LittleEndian.Uint64(res)
		if uint64(len(res)-8) < n {
			break
		}
		out = append(out, append([]byte(nil), res[8:8+n]...))
		res = res[8+n:]
	}
	if len(out) != c.size {
		return nil, fmt.Errorf("dist: exchange: got %d parts, want %d", len(out), c.size)
	}
	return out, nil
}

func (c *tcpComm) Barrier() error {
	_, err := c.Exchange(nil)
	return err
}
