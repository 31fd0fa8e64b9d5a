// Package tbevent writes scalars as TensorBoard event files, the format
// TensorBoard, tensorboardX and torch.utils.tensorboard read, so mempo's
// update and rollout metrics can be watched beside verl's.
//
// A file (events.out.tfevents.<unix time>.<host>.<pid>.mempo) is a sequence
// of TFRecords: uint64 little-endian length, its masked CRC-32C, the bytes,
// their masked CRC-32C. Each record is a tensorflow.Event protobuf; the first
// carries file_version "brain.Event:2", the others a Summary of simple_value
// scalars. The protobuf is encoded by hand: only five fields are used.
package tbevent

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MaskedCRC is TFRecord's checksum: CRC-32C rotated right by 15 bits plus a
// constant, so that a CRC of data that itself holds CRCs stays well mixed.
func MaskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// Scalar is one tagged value.
type Scalar struct {
	Tag   string
	Value float64
}

// Writer appends events to one file. It is safe for concurrent use; every
// Add is flushed, so TensorBoard sees a live run's points as they come.
type Writer struct {
	mu   sync.Mutex
	f    *os.File
	bw   *bufio.Writer
	path string
}

// Create makes dir and a new event file in it. A resumed run writes a second
// file into the same directory; TensorBoard reads them together.
func Create(dir string) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r == '/' || r == os.PathSeparator {
			return '_'
		}
		return r
	}, host)
	now := time.Now()
	path := filepath.Join(dir, fmt.Sprintf("events.out.tfevents.%d.%s.%d.mempo", now.Unix(), host, os.Getpid()))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	w := &Writer{f: f, bw: bufio.NewWriter(f), path: path}
	if err := w.write(fileVersionEvent(now)); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// Path is the event file's path.
func (w *Writer) Path() string { return w.path }

// Add writes one event holding the scalars at step, stamped now.
func (w *Writer) Add(step int64, scalars ...Scalar) error {
	return w.AddAt(time.Now(), step, scalars...)
}

// AddAt is Add with a given wall time.
func (w *Writer) AddAt(wall time.Time, step int64, scalars ...Scalar) error {
	if w == nil || len(scalars) == 0 {
		return nil
	}
	return w.write(scalarEvent(wall, step, scalars))
}

func (w *Writer) write(event []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return fmt.Errorf("tensorboard: %s: closed", w.path)
	}
	if err := WriteRecord(w.bw, event); err != nil {
		return fmt.Errorf("tensorboard: %s: %w", w.path, err)
	}
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("tensorboard: %s: %w", w.path, err)
	}
	return nil
}

// Close flushes and closes the file.
func (w *Writer) Close() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.bw.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	return err
}

// WriteRecord writes one TFRecord.
func WriteRecord(w io.Writer, data []byte) error {
	var hdr [12]byte
	binary.LittleEndian.PutUint64(hdr[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(hdr[8:], MaskedCRC(hdr[:8]))
	var foot [4]byte
	binary.LittleEndian.PutUint32(foot[:], MaskedCRC(data))
	for _, b := range [][]byte{hdr[:], data, foot[:]} {
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// ReadRecord reads one TFRecord and checks both CRCs; io.EOF at a clean end.
// A record cut short (a run still writing, or killed) is io.ErrUnexpectedEOF.
func ReadRecord(r io.Reader) ([]byte, error) {
	var hdr [12]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	if MaskedCRC(hdr[:8]) != binary.LittleEndian.Uint32(hdr[8:]) {
		return nil, fmt.Errorf("tensorboard: record length CRC mismatch")
	}
	n := binary.LittleEndian.Uint64(hdr[:8])
	if n > 1<<30 {
		return nil, fmt.Errorf("tensorboard: record of %d bytes", n)
	}
	buf := make([]byte, n+4)
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	data := buf[:n]
	if MaskedCRC(data) != binary.LittleEndian.Uint32(buf[n:]) {
		return nil, fmt.Errorf("tensorboard: record data CRC mismatch")
	}
	return data, nil
}

// Protobuf wire format: a key is field<<3 | wire type (0 varint, 1 fixed64,
// 2 length-delimited, 5 fixed32).
func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendKey(b []byte, field, wire int) []byte { return appendVarint(b, uint64(field<<3|wire)) }

func appendBytes(b []byte, field int, s []byte) []byte {
	b = appendKey(b, field, 2)
	b = appendVarint(b, uint64(len(s)))
	return append(b, s...)
}

// Event fields: wall_time = 1 (double), step = 2 (int64), file_version = 3
// (string), summary = 5 (Summary). Summary: value = 1 (repeated Value).
// Summary.Value: tag = 1 (string), simple_value = 2 (float).
func eventHeader(wall time.Time, step int64) []byte {
	b := appendKey(nil, 1, 1)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(wall.UnixNano())/1e9))
	if step != 0 {
		b = appendKey(b, 2, 0)
		b = appendVarint(b, uint64(step))
	}
	return b
}

func fileVersionEvent(wall time.Time) []byte {
	return appendBytes(eventHeader(wall, 0), 3, []byte("brain.Event:2"))
}

func scalarEvent(wall time.Time, step int64, scalars []Scalar) []byte {
	var summary []byte
	for _, s := range scalars {
		v := appendBytes(nil, 1, []byte(s.Tag))
		v = appendKey(v, 2, 5)
		v = binary.LittleEndian.AppendUint32(v, math.Float32bits(float32(s.Value)))
		summary = appendBytes(summary, 1, v)
	}
	return appendBytes(eventHeader(wall, step), 5, summary)
}
