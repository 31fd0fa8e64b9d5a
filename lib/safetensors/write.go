package safetensors

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/tensor/half"
)

// Tensor is one tensor to write. Float data comes in F32 and is converted to
// DType on write (F32, BF16 or F16; BF16 and F16 round to nearest, ties to
// even); integer data comes in I64 (written as I64 or I32, which must fit).
// Raw, when set, is written unchanged for any known dtype and must be exactly
// the tensor's byte length.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	F32   []float32
	I64   []int64
	Raw   []byte
}

// WriteFile writes tensors to path atomically (temporary file, then rename):
// the header lists __metadata__ first and the tensors in name order, is padded
// with spaces to a multiple of 8 bytes, and the data follows in the same order.
func WriteFile(path string, tensors []Tensor, metadata map[string]string) error {
	ts := append([]Tensor(nil), tensors...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	var hdr strings.Builder
	hdr.WriteByte('{')
	first := true
	if len(metadata) > 0 {
		b, err := json.Marshal(metadata)
		if err != nil {
			return fmt.Errorf("%s: metadata: %v", path, err)
		}
		hdr.WriteString(`"__metadata__":`)
		hdr.Write(b)
		first = false
	}
	var off int64
	for i, t := range ts {
		if t.Name == "" || t.Name == metaKey {
			return fmt.Errorf("%s: invalid tensor name %q", path, t.Name)
		}
		if i > 0 && ts[i-1].Name == t.Name {
			return fmt.Errorf("%s: tensor %q: written twice", path, t.Name)
		}
		if err := checkTensor(t); err != nil {
			return fmt.Errorf("%s: tensor %q: %v", path, t.Name, err)
		}
		n := NumElements(t.Shape) * int64(t.DType.Size())
		if !first {
			hdr.WriteByte(',')
		}
		first = false
		name, _ := json.Marshal(t.Name)
		hdr.Write(name)
		hdr.WriteString(`:{"dtype":"`)
		hdr.WriteString(string(t.DType))
		hdr.WriteString(`","shape":[`)
		for k, d := range t.Shape {
			if k > 0 {
				hdr.WriteByte(',')
			}
			hdr.WriteString(strconv.Itoa(d))
		}
		fmt.Fprintf(&hdr, `],"data_offsets":[%d,%d]}`, off, off+n)
		off += n
	}
	hdr.WriteByte('}')
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ')
	}

	out, err := fileio.Create(path)
	if err != nil {
		return err
	}
	defer out.Abort()
	w := bufio.NewWriterSize(out, 1<<20)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(hdr.Len()))
	w.Write(lenBuf[:])
	w.WriteString(hdr.String())
	chunk := make([]byte, 0, 1<<16)
	var big []byte
	for _, t := range ts {
		if t.Raw != nil {
			w.Write(t.Raw)
			continue
		}
		if t.DType == F32 && nativeLittleEndian && len(t.F32) > 0 {
			w.Write(unsafe.Slice((*byte)(unsafe.Pointer(&t.F32[0])), 4*len(t.F32)))
			continue
		}
		if (t.DType == BF16 || t.DType == F16) && nativeLittleEndian && len(t.F32) >= parallelMin {
			// In blocks of 64 MiB, each converted on every core.
			const block = 32 << 20
			if big == nil {
				big = make([]byte, 2*block)
			}
			for i := 0; i < len(t.F32); i += block {
				src := t.F32[i:min(i+block, len(t.F32))]
				to16(big, src, t.DType)
				w.Write(big[:2*len(src)])
			}
			continue
		}
		n := len(t.F32)
		if t.DType == I64 || t.DType == I32 {
			n = len(t.I64)
		}
		for i := 0; i < n; {
			chunk = chunk[:0]
			for ; i < n && len(chunk) < cap(chunk)-8; i++ {
				switch t.DType {
				case F32:
					chunk = binary.LittleEndian.AppendUint32(chunk, math.Float32bits(t.F32[i]))
				case BF16:
					chunk = binary.LittleEndian.AppendUint16(chunk, half.F32ToBF16(t.F32[i]))
				case F16:
					chunk = binary.LittleEndian.AppendUint16(chunk, half.F32ToF16(t.F32[i]))
				case I64:
					chunk = binary.LittleEndian.AppendUint64(chunk, uint64(t.I64[i]))
				case I32:
					chunk = binary.LittleEndian.AppendUint32(chunk, uint32(int32(t.I64[i])))
				}
			}
			w.Write(chunk)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return out.Commit()
}

func checkTensor(t Tensor) error {
	es := t.DType.Size()
	if es == 0 {
		return fmt.Errorf("unknown dtype %q", t.DType)
	}
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("negative dimension in shape %v", t.Shape)
		}
	}
	n := NumElements(t.Shape)
	if t.Raw != nil {
		if int64(len(t.Raw)) != n*int64(es) {
			return fmt.Errorf("raw data is %d bytes, shape %v of %s needs %d", len(t.Raw), t.Shape, t.DType, n*int64(es))
		}
		return nil
	}
	switch t.DType {
	case F32, BF16, F16:
		if int64(len(t.F32)) != n {
			return fmt.Errorf("%d float values for shape %v (%d elements)", len(t.F32), t.Shape, n)
		}
	case I64, I32:
		if int64(len(t.I64)) != n {
			return fmt.Errorf("%d integer values for shape %v (%d elements)", len(t.I64), t.Shape, n)
		}
		if t.DType == I32 {
			for _, v := range t.I64 {
				if v < math.MinInt32 || v > math.MaxInt32 {
					return fmt.Errorf("value %d does not fit in I32", v)
				}
			}
		}
	default:
		return fmt.Errorf("dtype %s can only be written from Raw bytes", t.DType)
	}
	return nil
}
