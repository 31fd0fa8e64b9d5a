package safetensors

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/tensor/half"
)

const models = "../../testdata/models"

// TestReadFixtures opens every file the transformers fixture script wrote and
// checks known facts about them: dtypes, shapes, metadata and sane values.
func TestReadFixtures(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(models, "*", "*.safetensors"))
	if len(files) < 8 {
		t.Fatalf("found only %d fixture files under %s", len(files), models)
	}
	for _, path := range files {
		f, err := Open(path)
		if err != nil {
			t.Fatalf("%v", err)
		}
		if len(f.Names()) == 0 {
			t.Errorf("%s: no tensors", path)
		}
		for _, name := range f.Names() {
			info, _ := f.Info(name)
			switch info.DType {
			case F32, BF16:
				v, shape, err := f.Float32(name)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(shape, info.Shape) || int64(len(v)) != info.NumElements() {
					t.Errorf("%s %s: shape %v, %d values", path, name, shape, len(v))
				}
				for _, x := range v {
					if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
						t.Fatalf("%s %s: non-finite value", path, name)
					}
				}
			case I64:
				if _, _, err := f.Int64(name); err != nil {
					t.Fatal(err)
				}
			default:
				t.Errorf("%s %s: unexpected dtype %s", path, name, info.DType)
			}
		}
		f.Close()
	}

	// Specific facts of two fixtures.
	f, err := Open(filepath.Join(models, "qwen2-bf16", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Metadata["format"] != "pt" {
		t.Errorf("metadata %v, want format=pt", f.Metadata)
	}
	info, ok := f.Info("model.embed_tokens.weight")
	if !ok || info.DType != BF16 || !reflect.DeepEqual(info.Shape, []int{320, 64}) || info.Begin != 0 || info.End != 40960 {
		t.Errorf("embed_tokens info %+v", info)
	}
	raw, _ := f.Raw("model.embed_tokens.weight")
	v, _, _ := f.Float32("model.embed_tokens.weight")
	for i := range v {
		if v[i] != half.BF16ToF32(binary.LittleEndian.Uint16(raw[2*i:])) {
			t.Fatalf("bf16 conversion mismatch at %d", i)
		}
	}
	if _, _, err := f.Int64("model.embed_tokens.weight"); err == nil || !strings.Contains(err.Error(), "model.embed_tokens.weight") {
		t.Errorf("Int64 of a BF16 tensor: %v", err)
	}

	g, err := Open(filepath.Join(models, "qwen2-tied-gqa1", "golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ids, shape, err := g.Int64("ids.0")
	if err != nil || !reflect.DeepEqual(shape, []int{17}) {
		t.Fatalf("ids.0: %v %v", shape, err)
	}
	for _, id := range ids {
		if id < 0 || id >= 320 {
			t.Errorf("id %d out of vocabulary", id)
		}
	}
	logits, shape, err := g.Float32("logits.0")
	if err != nil || !reflect.DeepEqual(shape, []int{17, 320}) || len(logits) != 17*320 {
		t.Fatalf("logits.0: %v %v", shape, err)
	}
	if g.Metadata["transformers"] != "5.17.0" {
		t.Errorf("golden metadata %v", g.Metadata)
	}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.safetensors")
	f32 := []float32{0, -1.5, 3.25, float32(math.Inf(1)), 1e-30, 65504, 7}
	bf := []float32{1.00390625, 1.01171875, math.Nextafter32(1.00390625, 2), -1.00390625, 3.0e38, 0}
	f16 := []float32{1 + 1.0/2048, 1 + 3.0/2048, 65504, 65520, 1.0 / (1 << 24), 1.0 / (1 << 25), 1.5 / (1 << 25), -2}
	i64 := []int64{0, -1, math.MaxInt64, math.MinInt64, 151643, 6}
	i32 := []int64{-7, math.MaxInt32, math.MinInt32}
	in := []Tensor{
		{Name: "z.f32", DType: F32, Shape: []int{7}, F32: f32},
		{Name: "a.bf16", DType: BF16, Shape: []int{2, 3}, F32: bf},
		{Name: "m.f16", DType: F16, Shape: []int{2, 2, 2}, F32: f16},
		{Name: "i.i64", DType: I64, Shape: []int{3, 2}, I64: i64},
		{Name: "i.i32", DType: I32, Shape: []int{3}, I64: i32},
		{Name: "scalar", DType: F32, Shape: []int{}, F32: []float32{42}},
		{Name: "empty", DType: F32, Shape: []int{0, 4}, F32: nil},
		{Name: "u8", DType: U8, Shape: []int{3}, Raw: []byte{1, 2, 255}},
	}
	if err := WriteFile(path, in, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.HeaderSize()%8 != 0 {
		t.Errorf("header size %d not 8-aligned", f.HeaderSize())
	}
	want := []string{"a.bf16", "empty", "i.i32", "i.i64", "m.f16", "scalar", "u8", "z.f32"}
	if !reflect.DeepEqual(f.Names(), want) {
		t.Errorf("names %v", f.Names())
	}
	// Data is laid out in name order.
	var prev int64
	for _, n := range want {
		info, _ := f.Info(n)
		if info.Begin != prev {
			t.Errorf("%s begins at %d, want %d", n, info.Begin, prev)
		}
		prev = info.End
	}
	got, shape, _ := f.Float32("z.f32")
	if !reflect.DeepEqual(got, f32) || !reflect.DeepEqual(shape, []int{7}) {
		t.Errorf("f32 %v %v", got, shape)
	}
	// Hand-computed bf16: 1+2^-8 is halfway between 1 and 1+2^-7 -> even (1);
	// 1+3*2^-8 is halfway between 1+2^-7 and 1+2^-6 -> even (1+2^-6); just
	// above the first tie rounds up; 3e38 rounds to the nearest bf16 (finite).
	raw, _ := f.Raw("a.bf16")
	wantBits := []uint16{0x3F80, 0x3F82, 0x3F81, 0xBF80, 0x7F62, 0}
	for i, w := range wantBits {
		if b := binary.LittleEndian.Uint16(raw[2*i:]); b != w {
			t.Errorf("bf16[%d] of %v = %#04x, want %#04x", i, bf[i], b, w)
		}
	}
	got, _, _ = f.Float32("a.bf16")
	if got[0] != 1 || got[1] != 1.015625 || got[2] != 1.0078125 || got[3] != -1 {
		t.Errorf("bf16 values %v", got)
	}
	raw, _ = f.Raw("m.f16")
	wantBits = []uint16{0x3C00, 0x3C02, 0x7BFF, 0x7C00, 0x0001, 0x0000, 0x0001, 0xC000}
	for i, w := range wantBits {
		if b := binary.LittleEndian.Uint16(raw[2*i:]); b != w {
			t.Errorf("f16[%d] of %v = %#04x, want %#04x", i, f16[i], b, w)
		}
	}
	gi, _, _ := f.Int64("i.i64")
	if !reflect.DeepEqual(gi, i64) {
		t.Errorf("i64 %v", gi)
	}
	gi, _, _ = f.Int64("i.i32")
	if !reflect.DeepEqual(gi, i32) {
		t.Errorf("i32 %v", gi)
	}
	if v, s, _ := f.Float32("scalar"); len(v) != 1 || v[0] != 42 || len(s) != 0 {
		t.Errorf("scalar %v %v", v, s)
	}
	if v, _, err := f.Float32("empty"); err != nil || len(v) != 0 {
		t.Errorf("empty %v %v", v, err)
	}
	if r, _ := f.Raw("u8"); !reflect.DeepEqual(r, []byte{1, 2, 255}) {
		t.Errorf("u8 %v", r)
	}
	if _, _, err := f.Float32("u8"); err == nil || !strings.Contains(err.Error(), `"u8"`) {
		t.Errorf("Float32 of U8: %v", err)
	}
	if _, err := f.Raw("nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("missing tensor: %v", err)
	}
}

func writeRawFile(t *testing.T, header string, dataLen int, lenOverride int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bad.safetensors")
	n := int64(len(header))
	if lenOverride >= 0 {
		n = lenOverride
	}
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, uint64(n))
	b = append(b, header...)
	b = append(b, make([]byte, dataLen)...)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBadFiles(t *testing.T) {
	ok := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	if f, err := Open(writeRawFile(t, ok, 8, -1)); err != nil {
		t.Fatalf("valid file refused: %v", err)
	} else {
		f.Close()
	}
	cases := []struct {
		name, header string
		data         int
		lenOverride  int64
		want         []string
	}{
		{"truncated", `{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, 8, -1, []string{`"a"`, "past the end"}},
		{"header too long", ok, 8, 1 << 20, []string{"header length 1048576", "larger than the file"}},
		{"overlap", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12, -1, []string{`"b"`, "overlap", `"a"`}},
		{"bad json", `{"a":{"dtype":"F32",`, 8, -1, []string{"bad JSON header"}},
		{"not object", `[1,2]`, 0, -1, []string{"not a JSON object"}},
		{"shape mismatch", `{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8, -1, []string{`"w"`, "needs 12 bytes"}},
		{"unknown dtype", `{"w":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}}`, 8, -1, []string{`"w"`, `unknown dtype "F31"`}},
		{"bad offsets", `{"w":{"dtype":"F32","shape":[2],"data_offsets":[8]}}`, 8, -1, []string{`"w"`, "two entries"}},
		{"reversed offsets", `{"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, 8, -1, []string{`"w"`, "bad data_offsets"}},
		{"bad metadata", `{"__metadata__":{"x":1}}`, 0, -1, []string{"__metadata__"}},
	}
	for _, c := range cases {
		path := writeRawFile(t, c.header, c.data, c.lenOverride)
		f, err := Open(path)
		if err == nil {
			f.Close()
			t.Errorf("%s: accepted", c.name)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, path) {
			t.Errorf("%s: error does not name the file: %s", c.name, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: error %q lacks %q", c.name, msg, w)
			}
		}
	}
	short := filepath.Join(t.TempDir(), "short.safetensors")
	os.WriteFile(short, []byte{1, 2}, 0o644)
	if _, err := Open(short); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Errorf("short file: %v", err)
	}
}

func TestWriteRejects(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	os.WriteFile(path, []byte("keep"), 0o644)
	for _, c := range []struct {
		ts   []Tensor
		want string
	}{
		{[]Tensor{{Name: "a", DType: F32, Shape: []int{3}, F32: []float32{1}}}, `"a"`},
		{[]Tensor{{Name: "a", DType: I32, Shape: []int{1}, I64: []int64{1 << 40}}}, "I32"},
		{[]Tensor{{Name: "a", DType: "Q4", Shape: []int{1}, F32: []float32{1}}}, "unknown dtype"},
		{[]Tensor{{Name: "a", DType: F32, Shape: []int{1}, F32: []float32{1}}, {Name: "a", DType: F32, Shape: []int{1}, F32: []float32{1}}}, "twice"},
		{[]Tensor{{Name: "b", DType: U8, Shape: []int{2}, Raw: []byte{1}}}, "raw data"},
	} {
		err := WriteFile(path, c.ts, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("WriteFile(%v) error %v, want one naming the file and %q", c.ts[0], err, c.want)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "keep" {
		t.Errorf("failed write damaged the existing file: %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("leftovers %v", entries)
	}
}

// TestRoundTripLarge crosses the writer's 64 KiB conversion chunks.
func TestRoundTripLarge(t *testing.T) {
	const n = 100003
	f32 := make([]float32, n)
	i64 := make([]int64, n)
	for i := range f32 {
		f32[i] = float32(i)*0.37 - 5000
		i64[i] = int64(i)*7919 - 1<<40
	}
	path := filepath.Join(t.TempDir(), "big.safetensors")
	err := WriteFile(path, []Tensor{
		{Name: "f32", DType: F32, Shape: []int{n}, F32: f32},
		{Name: "bf16", DType: BF16, Shape: []int{n}, F32: f32},
		{Name: "f16", DType: F16, Shape: []int{n}, F32: f32},
		{Name: "i64", DType: I64, Shape: []int{n}, I64: i64},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, _, _ := f.Float32("f32")
	if !reflect.DeepEqual(got, f32) {
		t.Error("f32 differs")
	}
	for _, c := range []struct {
		name string
		conv func(float32) float32
	}{
		{"bf16", func(x float32) float32 { return half.BF16ToF32(half.F32ToBF16(x)) }},
		{"f16", func(x float32) float32 { return half.F16ToF32(half.F32ToF16(x)) }},
	} {
		got, _, _ := f.Float32(c.name)
		for i := range got {
			if got[i] != c.conv(f32[i]) {
				t.Fatalf("%s[%d] = %v, want %v", c.name, i, got[i], c.conv(f32[i]))
			}
		}
	}
	gi, _, _ := f.Int64("i64")
	if !reflect.DeepEqual(gi, i64) {
		t.Error("i64 differs")
	}
}
