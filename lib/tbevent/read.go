package tbevent

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// Event is a decoded event: the fields this package writes.
type Event struct {
	WallTime    float64
	Step        int64
	FileVersion string
	Scalars     []Scalar
}

// ReadFile decodes every event of an event file, checking the CRCs. A last
// record cut short is dropped, as TensorBoard does for a file still being
// written.
func ReadFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var out []Event
	for {
		rec, err := ReadRecord(r)
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("%s: record %d: %w", path, len(out)+1, err)
		}
		ev, err := DecodeEvent(rec)
		if err != nil {
			return out, fmt.Errorf("%s: record %d: %w", path, len(out)+1, err)
		}
		out = append(out, ev)
	}
}

// DecodeEvent decodes one Event protobuf; fields it does not know are
// skipped.
func DecodeEvent(b []byte) (Event, error) {
	var ev Event
	err := fields(b, func(field, wire int, v uint64, data []byte) error {
		switch {
		case field == 1 && wire == 1:
			ev.WallTime = math.Float64frombits(v)
		case field == 2 && wire == 0:
			ev.Step = int64(v)
		case field == 3 && wire == 2:
			ev.FileVersion = string(data)
		case field == 5 && wire == 2:
			return fields(data, func(field, wire int, _ uint64, val []byte) error {
				if field != 1 || wire != 2 {
					return nil
				}
				var s Scalar
				err := fields(val, func(field, wire int, v uint64, data []byte) error {
					switch {
					case field == 1 && wire == 2:
						s.Tag = string(data)
					case field == 2 && wire == 5:
						s.Value = float64(math.Float32frombits(uint32(v)))
					}
					return nil
				})
				ev.Scalars = append(ev.Scalars, s)
				return err
			})
		}
		return nil
	})
	return ev, err
}

// fields walks the fields of one protobuf message.
func fields(b []byte, fn func(field, wire int, v uint64, data []byte) error) error {
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return fmt.Errorf("tensorboard: bad protobuf key")
		}
		b = b[n:]
		field, wire := int(key>>3), int(key&7)
		var v uint64
		var data []byte
		switch wire {
		case 0:
			v, n = binary.Uvarint(b)
			if n <= 0 {
				return fmt.Errorf("tensorboard: bad varint in field %d", field)
			}
			b = b[n:]
		case 1:
			if len(b) < 8 {
				return fmt.Errorf("tensorboard: short fixed64 in field %d", field)
			}
			v, b = binary.LittleEndian.Uint64(b), b[8:]
		case 5:
			if len(b) < 4 {
				return fmt.Errorf("tensorboard: short fixed32 in field %d", field)
			}
			v, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				return fmt.Errorf("tensorboard: bad length in field %d", field)
			}
			data, b = b[n:n+int(l)], b[n+int(l):]
		default:
			return fmt.Errorf("tensorboard: wire type %d in field %d", wire, field)
		}
		if err := fn(field, wire, v, data); err != nil {
			return err
		}
	}
	return nil
}
