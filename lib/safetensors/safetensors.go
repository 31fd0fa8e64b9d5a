// Package safetensors reads and writes the .safetensors tensor file format used
// by Hugging Face: an 8-byte little-endian header length, a JSON header naming
// every tensor's dtype, shape and byte range, then the raw little-endian data.
//
// Open memory-maps a file and validates its whole header before anything is
// read (dtypes, shapes against byte lengths, offsets in range and not
// overlapping), so a truncated or corrupt file is refused with an error that
// names the file and the tensor. WriteFile writes a file the way the Python
// safetensors library does (header padded with spaces to 8 bytes, tensors in
// name order) through a temporary file renamed into place.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"syscall"
	"unsafe"

	"github.com/mempo/mempo/lib/tensor/half"
)

// nativeLittleEndian is true on the hosts Go mostly runs on; F32 data is then
// copied in bulk instead of decoded element by element.
var nativeLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// DType is a safetensors element type as spelled in the header.
type DType string

// The element types this package converts; any other known dtype can still be
// read with Raw.
const (
	F32  DType = "F32"
	BF16 DType = "BF16"
	F16  DType = "F16"
	I64  DType = "I64"
	I32  DType = "I32"

	F64    DType = "F64"
	I16    DType = "I16"
	I8     DType = "I8"
	U8     DType = "U8"
	U16    DType = "U16"
	U32    DType = "U32"
	U64    DType = "U64"
	BOOL   DType = "BOOL"
	F8E4M3 DType = "F8_E4M3"
	F8E5M2 DType = "F8_E5M2"
)

const metaKey = "__metadata__"

// maxHeaderBytes bounds the JSON header, as the reference implementation does.
const maxHeaderBytes = 100 << 20

var dtypeSizes = map[DType]int{
	F64: 8, F32: 4, F16: 2, BF16: 2,
	I64: 8, I32: 4, I16: 2, I8: 1,
	U64: 8, U32: 4, U16: 2, U8: 1,
	BOOL: 1, F8E4M3: 1, F8E5M2: 1,
}

// Size is the number of bytes of one element of d, or 0 for an unknown dtype.
func (d DType) Size() int { return dtypeSizes[d] }

// IsFloat reports whether Float32 can convert tensors of this dtype.
func (d DType) IsFloat() bool { return d == F32 || d == BF16 || d == F16 }

// TensorInfo describes one tensor of a file. Begin and End are byte offsets
// into the data section (after the header), as in the header's data_offsets.
type TensorInfo struct {
	Name       string
	DType      DType
	Shape      []int
	Begin, End int64
}

// NumElements is the product of the shape (1 for a scalar).
func (t TensorInfo) NumElements() int64 { return NumElements(t.Shape) }

// NumElements is the product of shape (1 for the empty shape of a scalar).
func NumElements(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= int64(d)
	}
	return n
}

// File is an open, memory-mapped safetensors file. The slices Raw returns stay
// valid until Close.
type File struct {
	Path     string
	Metadata map[string]string // the header's __metadata__; nil when absent

	data    []byte // whole file, memory-mapped (nil for an empty data section)
	mapped  bool
	dataOff int64 // start of the data section in data
	size    int64 // file size
	tensors map[string]TensorInfo
	names   []string
}

type headerEntry struct {
	DType       DType   `json:"dtype"`
	Shape       []int   `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// Open memory-maps path and validates its header.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size < 8 {
		return nil, fmt.Errorf("%s: file is %d bytes, too short for a safetensors header", path, size)
	}
	f := &File{Path: path, size: size}
	if size > math.MaxInt {
		return nil, fmt.Errorf("%s: file too large to map", path)
	}
	data, err := syscall.Mmap(int(fh.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		// Some filesystems cannot map; fall back to reading the file.
		data, err = os.ReadFile(path)
		if err != nil {
			return nil, err
		}
	} else {
		f.mapped = true
	}
	f.data = data
	if err := f.parse(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (f *File) parse() error {
	n := binary.LittleEndian.Uint64(f.data[:8])
	if n > uint64(f.size-8) {
		return fmt.Errorf("%s: header length %d is larger than the file (%d bytes after the length prefix)", f.Path, n, f.size-8)
	}
	if n > maxHeaderBytes {
		return fmt.Errorf("%s: header length %d exceeds the %d-byte limit", f.Path, n, maxHeaderBytes)
	}
	hdr := f.data[8 : 8+n]
	f.dataOff = 8 + int64(n)
	if len(bytes.TrimSpace(hdr)) == 0 || bytes.TrimSpace(hdr)[0] != '{' {
		return fmt.Errorf("%s: header is not a JSON object", f.Path)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return fmt.Errorf("%s: bad JSON header: %v", f.Path, err)
	}
	dataLen := f.size - f.dataOff
	f.tensors = make(map[string]TensorInfo, len(raw))
	for name, msg := range raw {
		if name == metaKey {
			var md map[string]string
			if err := json.Unmarshal(msg, &md); err != nil {
				return fmt.Errorf("%s: __metadata__ must map strings to strings: %v", f.Path, err)
			}
			f.Metadata = md
			continue
		}
		var e headerEntry
		dec := json.NewDecoder(bytes.NewReader(msg))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return fmt.Errorf("%s: tensor %q: bad header entry: %v", f.Path, name, err)
		}
		es := e.DType.Size()
		if es == 0 {
			return fmt.Errorf("%s: tensor %q: unknown dtype %q", f.Path, name, e.DType)
		}
		if e.Shape == nil {
			return fmt.Errorf("%s: tensor %q: missing shape", f.Path, name)
		}
		if len(e.DataOffsets) != 2 {
			return fmt.Errorf("%s: tensor %q: data_offsets must have two entries, got %d", f.Path, name, len(e.DataOffsets))
		}
		nel := int64(1)
		for _, d := range e.Shape {
			if d < 0 {
				return fmt.Errorf("%s: tensor %q: negative dimension in shape %v", f.Path, name, e.Shape)
			}
			if d != 0 && nel > math.MaxInt64/int64(d)/int64(es) {
				return fmt.Errorf("%s: tensor %q: shape %v overflows", f.Path, name, e.Shape)
			}
			nel *= int64(d)
		}
		b, end := e.DataOffsets[0], e.DataOffsets[1]
		if b < 0 || end < b {
			return fmt.Errorf("%s: tensor %q: bad data_offsets [%d, %d]", f.Path, name, b, end)
		}
		if end-b != nel*int64(es) {
			return fmt.Errorf("%s: tensor %q: shape %v of %s needs %d bytes but data_offsets [%d, %d] span %d",
				f.Path, name, e.Shape, e.DType, nel*int64(es), b, end, end-b)
		}
		if end > dataLen {
			return fmt.Errorf("%s: tensor %q: data_offsets [%d, %d] run past the end of the file (data section is %d bytes; file truncated?)",
				f.Path, name, b, end, dataLen)
		}
		f.tensors[name] = TensorInfo{Name: name, DType: e.DType, Shape: e.Shape, Begin: b, End: end}
		f.names = append(f.names, name)
	}
	sort.Strings(f.names)
	// Overlap check: sort by start offset; empty tensors overlap nothing.
	byOff := make([]TensorInfo, 0, len(f.tensors))
	for _, t := range f.tensors {
		if t.End > t.Begin {
			byOff = append(byOff, t)
		}
	}
	sort.Slice(byOff, func(i, j int) bool {
		if byOff[i].Begin != byOff[j].Begin {
			return byOff[i].Begin < byOff[j].Begin
		}
		return byOff[i].Name < byOff[j].Name
	})
	for i := 1; i < len(byOff); i++ {
		if byOff[i].Begin < byOff[i-1].End {
			return fmt.Errorf("%s: tensor %q: data_offsets [%d, %d] overlap tensor %q [%d, %d]", f.Path,
				byOff[i].Name, byOff[i].Begin, byOff[i].End, byOff[i-1].Name, byOff[i-1].Begin, byOff[i-1].End)
		}
	}
	return nil
}

// Names lists the tensor names in sorted order.
func (f *File) Names() []string { return append([]string(nil), f.names...) }

// Info describes the named tensor.
func (f *File) Info(name string) (TensorInfo, bool) {
	t, ok := f.tensors[name]
	if ok {
		t.Shape = append([]int(nil), t.Shape...)
	}
	return t, ok
}

// HeaderSize is the length prefix plus the JSON header: where data begins.
func (f *File) HeaderSize() int64 { return f.dataOff }

// Raw returns the tensor's bytes as stored (little-endian), a view of the
// mapped file that must not be written to or used after Close.
func (f *File) Raw(name string) ([]byte, error) {
	if f.data == nil {
		return nil, fmt.Errorf("%s: file is closed", f.Path)
	}
	t, ok := f.tensors[name]
	if !ok {
		return nil, fmt.Errorf("%s: no tensor %q", f.Path, name)
	}
	return f.data[f.dataOff+t.Begin : f.dataOff+t.End : f.dataOff+t.End], nil
}

// Float32 converts an F32, BF16 or F16 tensor to a new []float32 and returns
// it with its shape.
func (f *File) Float32(name string) ([]float32, []int, error) {
	raw, err := f.Raw(name)
	if err != nil {
		return nil, nil, err
	}
	t := f.tensors[name]
	out := make([]float32, t.NumElements())
	switch t.DType {
	case F32:
		if nativeLittleEndian && len(out) > 0 {
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(raw)), raw)
		} else {
			for i := range out {
				out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
		}
	case BF16:
		parallelFor(len(out), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				out[i] = half.BF16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
			}
		})
	case F16:
		for i := range out {
			out[i] = half.F16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	default:
		return nil, nil, fmt.Errorf("%s: tensor %q: dtype %s is not a float type (want F32, BF16 or F16)", f.Path, name, t.DType)
	}
	return out, append([]int(nil), t.Shape...), nil
}

// Int64 converts an I64 or I32 tensor to a new []int64 and returns it with
// its shape.
func (f *File) Int64(name string) ([]int64, []int, error) {
	raw, err := f.Raw(name)
	if err != nil {
		return nil, nil, err
	}
	t := f.tensors[name]
	out := make([]int64, t.NumElements())
	switch t.DType {
	case I64:
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
		}
	case I32:
		for i := range out {
			out[i] = int64(int32(binary.LittleEndian.Uint32(raw[4*i:])))
		}
	default:
		return nil, nil, fmt.Errorf("%s: tensor %q: dtype %s is not an integer type (want I64 or I32)", f.Path, name, t.DType)
	}
	return out, append([]int(nil), t.Shape...), nil
}

// Close unmaps the file. Slices from Raw must not be used afterwards.
func (f *File) Close() error {
	if f.data == nil {
		return nil
	}
	var err error
	if f.mapped {
		err = syscall.Munmap(f.data)
	}
	f.data = nil
	return err
}
