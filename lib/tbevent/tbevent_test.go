package tbevent

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CRC-32C check values: "123456789" (the CRC catalogue's check value) and
// RFC 3720's iSCSI vectors; the mask is TFRecord's ((c >> 15) | (c << 17)) +
// 0xa282ead8, worked by hand for the first.
func TestMaskedCRCKnownValues(t *testing.T) {
	ones := bytes.Repeat([]byte{0xff}, 32)
	inc := make([]byte, 32)
	for i := range inc {
		inc[i] = byte(i)
	}
	for _, c := range []struct {
		in   []byte
		want uint32
	}{
		{[]byte("123456789"), 0xe3069283},
		{make([]byte, 32), 0x8a9136aa},
		{ones, 0x62a8ab43},
		{inc, 0x46dd794e},
	} {
		if got := crc32.Checksum(c.in, castagnoli); got != c.want {
			t.Errorf("crc32c(%x) = %08x, want %08x", c.in, got, c.want)
		}
	}
	// 0xe3069283 rotated right by 15 is 0x2507c60d; + 0xa282ead8 = 0xc78ab0e5.
	if got := MaskedCRC([]byte("123456789")); got != 0xc78ab0e5 {
		t.Errorf("masked crc = %08x, want c78ab0e5", got)
	}
}

func TestRecordLayout(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteRecord(&buf, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if len(b) != 8+4+3+4 || binary.LittleEndian.Uint64(b) != 3 || string(b[12:15]) != "abc" {
		t.Fatalf("record % x", b)
	}
	if binary.LittleEndian.Uint32(b[8:]) != MaskedCRC(b[:8]) || binary.LittleEndian.Uint32(b[15:]) != MaskedCRC([]byte("abc")) {
		t.Fatal("CRCs not where TFRecord puts them")
	}
	got, err := ReadRecord(bytes.NewReader(b))
	if err != nil || string(got) != "abc" {
		t.Fatalf("read back %q, %v", got, err)
	}
	// A flipped data byte or a cut record is caught.
	bad := append([]byte(nil), b...)
	bad[13] ^= 1
	if _, err := ReadRecord(bytes.NewReader(bad)); err == nil {
		t.Error("corrupt record read without error")
	}
	if _, err := ReadRecord(bytes.NewReader(b[:14])); err != io.ErrUnexpectedEOF {
		t.Errorf("cut record: %v", err)
	}
}

// The Event encoding, byte by byte, for one scalar at step 3: protobuf keys
// 0x09 (wall_time, fixed64), 0x10 (step, varint), 0x2a (summary), 0x0a
// (value), 0x0a (tag), 0x15 (simple_value, fixed32).
func TestEventBytes(t *testing.T) {
	wall := time.Unix(2, 500_000_000)
	got := scalarEvent(wall, 3, []Scalar{{"a/b", 1.5}})
	want := []byte{0x09}
	want = binary.LittleEndian.AppendUint64(want, math.Float64bits(2.5))
	want = append(want, 0x10, 3, 0x2a, 12, 0x0a, 10, 0x0a, 3, 'a', '/', 'b', 0x15)
	want = binary.LittleEndian.AppendUint32(want, math.Float32bits(1.5))
	if !bytes.Equal(got, want) {
		t.Fatalf("event\n got % x\nwant % x", got, want)
	}
}

func TestWriterRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tb")
	w, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(1, Scalar{"update/loss", 0.25}, Scalar{"update/kl", -1e-3}); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(300, Scalar{"update/loss", math.NaN()}); err != nil {
		t.Fatal(err)
	}
	// Flushed on every Add: readable before Close.
	evs, err := ReadFile(w.Path())
	if err != nil || len(evs) != 3 {
		t.Fatalf("%d events before close, %v", len(evs), err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	evs, err = ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if evs[0].FileVersion != "brain.Event:2" || evs[0].WallTime < 1.7e9 {
		t.Errorf("first event %+v", evs[0])
	}
	if e := evs[1]; e.Step != 1 || len(e.Scalars) != 2 || e.Scalars[0] != (Scalar{"update/loss", 0.25}) || e.Scalars[1].Tag != "update/kl" || float32(e.Scalars[1].Value) != float32(-1e-3) {
		t.Errorf("second event %+v", e)
	}
	if e := evs[2]; e.Step != 300 || !math.IsNaN(e.Scalars[0].Value) {
		t.Errorf("third event %+v", e)
	}
	// A killed writer leaves a partial last record: the rest still reads.
	raw, _ := os.ReadFile(w.Path())
	cut := filepath.Join(dir, "events.out.tfevents.cut")
	os.WriteFile(cut, raw[:len(raw)-5], 0o644)
	if evs, err := ReadFile(cut); err != nil || len(evs) != 2 {
		t.Errorf("cut file: %d events, %v", len(evs), err)
	}
	if filepath.Base(w.Path())[:len("events.out.tfevents.")] != "events.out.tfevents." {
		t.Errorf("file name %s: TensorBoard looks for events.out.tfevents.*", w.Path())
	}
}

func TestFields(t *testing.T) {
	x := 2.0
	row := struct {
		Step  int64    `json:"step"`
		Loss  float64  `json:"loss"`
		KL    *float64 `json:"kl"`
		Ent   *float64 `json:"entropy"`
		Name  string   `json:"policy"`
		Inner int      `json:"-"`
	}{Step: 4, Loss: 0.5, KL: &x}
	got := Fields("update", row, "step")
	want := []Scalar{{"update/loss", 0.5}, {"update/kl", 2}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Fields = %v, want %v (nil pointers and strings left out)", got, want)
	}
}
