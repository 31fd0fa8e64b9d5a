package faiss

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// NPYReader streams the rows of a .npy file holding a C-ordered little-endian
// float32 matrix [N, d] (numpy.save of a float32 array), without loading it.
type NPYReader struct {
	r    *bufio.Reader
	Rows int64 // N
	Dim  int   // d
	// DataOffset is where the rows start: a file holds exactly
	// DataOffset + 4·Rows·Dim bytes.
	DataOffset int64
	read       int64
	buf        []byte
}

var (
	npyDescr   = regexp.MustCompile(`'descr'\s*:\s*'([^']*)'`)
	npyFortran = regexp.MustCompile(`'fortran_order'\s*:\s*(True|False)`)
	npyShape   = regexp.MustCompile(`'shape'\s*:\s*\(([^)]*)\)`)
)

// NewNPYReader reads the header and checks it describes a float32 matrix.
func NewNPYReader(r io.Reader) (*NPYReader, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var pre [8]byte
	if _, err := io.ReadFull(br, pre[:]); err != nil {
		return nil, fmt.Errorf("npy: short header: %w", err)
	}
	if string(pre[:6]) != "\x93NUMPY" {
		return nil, fmt.Errorf("npy: not a .npy file (bad magic)")
	}
	var hlen, lenBytes int
	switch pre[6] {
	case 1:
		lenBytes = 2
		var b [2]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return nil, fmt.Errorf("npy: short header: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint16(b[:]))
	case 2, 3:
		lenBytes = 4
		var b [4]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return nil, fmt.Errorf("npy: short header: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint32(b[:]))
	default:
		return nil, fmt.Errorf("npy: unsupported format version %d", pre[6])
	}
	if hlen > 1<<20 {
		return nil, fmt.Errorf("npy: header length %d too large", hlen)
	}
	h := make([]byte, hlen)
	if _, err := io.ReadFull(br, h); err != nil {
		return nil, fmt.Errorf("npy: short header: %w", err)
	}
	hs := string(h)
	m := npyDescr.FindStringSubmatch(hs)
	if m == nil || (m[1] != "<f4" && m[1] != "=f4" && m[1] != "|f4") {
		return nil, fmt.Errorf("npy: dtype %q is not little-endian float32 (<f4)", firstGroup(m))
	}
	if f := npyFortran.FindStringSubmatch(hs); f == nil || f[1] != "False" {
		return nil, fmt.Errorf("npy: fortran_order arrays are not supported; save a C-ordered array")
	}
	s := npyShape.FindStringSubmatch(hs)
	if s == nil {
		return nil, fmt.Errorf("npy: header has no shape")
	}
	var dims []int64
	for _, p := range strings.Split(s[1], ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("npy: bad shape %q", s[1])
		}
		dims = append(dims, v)
	}
	if len(dims) != 2 || dims[1] == 0 {
		return nil, fmt.Errorf("npy: shape (%s) is not a matrix [N, d]", s[1])
	}
	return &NPYReader{r: br, Rows: dims[0], Dim: int(dims[1]), DataOffset: int64(8 + lenBytes + hlen)}, nil
}

func firstGroup(m []string) string {
	if len(m) > 1 {
		return m[1]
	}
	return ""
}

// Next fills dst (a multiple of Dim floats) with the next rows and returns how
// many rows it read; 0 and io.EOF at the end.
func (n *NPYReader) Next(dst []float32) (int, error) {
	rows := len(dst) / n.Dim
	if left := n.Rows - n.read; int64(rows) > left {
		rows = int(left)
	}
	if rows == 0 {
		return 0, io.EOF
	}
	nb := rows * n.Dim * 4
	if cap(n.buf) < nb {
		n.buf = make([]byte, nb)
	}
	b := n.buf[:nb]
	if _, err := io.ReadFull(n.r, b); err != nil {
		return 0, fmt.Errorf("npy: truncated data after row %d of %d: %w", n.read, n.Rows, err)
	}
	for i := 0; i < rows*n.Dim; i++ {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[i*4:]))
	}
	n.read += int64(rows)
	return rows, nil
}

// ReadAll reads the remaining rows into one slice.
func (n *NPYReader) ReadAll() ([]float32, error) {
	out := make([]float32, (n.Rows-n.read)*int64(n.Dim))
	if len(out) == 0 {
		return out, nil
	}
	if _, err := n.Next(out); err != nil {
		return nil, err
	}
	return out, nil
}

// WriteNPY writes a float32 matrix [rows, dim] in .npy format (version 1.0).
func WriteNPY(w io.Writer, v []float32, dim int) error {
	if dim <= 0 || len(v)%dim != 0 {
		return fmt.Errorf("npy: %d floats is not a whole number of rows of %d", len(v), dim)
	}
	h := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", len(v)/dim, dim)
	pad := 64 - (10+len(h)+1)%64
	h += strings.Repeat(" ", pad%64) + "\n"
	bw := bufio.NewWriter(w)
	bw.WriteString("\x93NUMPY\x01\x00")
	binary.Write(bw, binary.LittleEndian, uint16(len(h)))
	bw.WriteString(h)
	var b [4]byte
	for _, f := range v {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(f))
		bw.Write(b[:])
	}
	return bw.Flush()
}
