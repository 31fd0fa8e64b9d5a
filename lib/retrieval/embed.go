package retrieval

// The embedding stage of mempo-index --encoder: corpus passages are embedded
// with a BERT-family encoder (lib/encoder) and streamed to a .npy file,
// which then builds dense.faiss like --embeddings does.
//
// The file is resumable: passages go in fixed chunks of rows, each appended
// whole, and the .npy header is rewritten with the row count after every
// chunk. A sidecar (FILE.json) records what the rows were made with. After
// a kill, rerunning the same command keeps the complete chunks already on
// disk (cutting off a chunk that was half written) and embeds from there;
// since the chunks, and so the batches, are the same as in an uninterrupted
// run, the result is byte-identical to one.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/mempo/mempo/lib/cli"
	"github.com/mempo/mempo/lib/encoder"
)

// npyHeaderLen is the fixed size of the .npy header written here (magic,
// version, length and the padded dict), large enough for any row count.
const npyHeaderLen = 128

// EmbedOptions configure EmbedCorpus.
type EmbedOptions struct {
	// ChunkRows is the number of passages embedded and appended at a time
	// (default 1024); a resumed run keeps the whole chunks on disk.
	ChunkRows int
	// Model names the encoder in the sidecar (its directory).
	Model    string
	Progress *cli.Progress
	Log      io.Writer
	// AfterChunk, when set, is called after each chunk is on disk with the
	// rows written so far; an error stops the run there (tests use it to
	// interrupt a run at a known point).
	AfterChunk func(rows int64) error
}

// embedMeta is the sidecar: a file made with different settings is not
// resumed.
type embedMeta struct {
	Format        string `json:"format"`
	Corpus        string `json:"corpus"`
	Model         string `json:"model"`
	Family        string `json:"family"`
	Pooling       string `json:"pooling"`
	PassagePrefix string `json:"passage_prefix"`
	MaxLength     int    `json:"max_length"`
	BatchSize     int    `json:"batch_size"`
	ChunkRows     int    `json:"chunk_rows"`
	Dim           int    `json:"dim"`
	// Compute is "" for the CPU forward (fp32) and "cuda fp16" / "cuda
	// fp32" for the GPU's: rows of different forwards differ in their
	// last bits, so a file is resumed only by the same kind of forward.
	Compute  string `json:"compute,omitempty"`
	Complete bool   `json:"complete"`
}

// EmbedStats report an EmbedCorpus run.
type EmbedStats struct {
	Rows, Resumed int64 // rows in the file, rows kept from an earlier run
	Seconds       float64
}

// EmbedCorpus embeds every passage's contents (with the encoder's passage
// prefix) into the .npy file at path, resuming a file an interrupted run
// left there.
func EmbedCorpus(ctx context.Context, enc *encoder.Encoder, corpus, path string, opts EmbedOptions) (EmbedStats, error) {
	var st EmbedStats
	if opts.ChunkRows <= 0 {
		opts.ChunkRows = 1024
	}
	start := time.Now()
	meta := embedMeta{Format: "mempo-embeddings/1", Corpus: corpus, Model: opts.Model, Family: enc.Family,
		Pooling: string(enc.Pooling), PassagePrefix: enc.PassagePrefix, MaxLength: enc.MaxLength,
		BatchSize: enc.BatchSize, ChunkRows: opts.ChunkRows, Dim: enc.Dim(), Compute: computeOf(enc)}
	d := enc.Dim()
	rowBytes := int64(4 * d)
	metaPath := path + ".json"

	var done int64
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	switch {
	case err == nil:
		old, merr := readEmbedMeta(metaPath)
		same := merr == nil && old.sameRun(meta)
		if !same {
			f.Close()
			if merr != nil {
				return st, fmt.Errorf("%s exists without a readable %s (%v); remove it to start over", path, metaPath, merr)
			}
			return st, fmt.Errorf("%s was made with other settings (%s); remove it to start over", path, old.describe())
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return st, err
		}
		rows := max(fi.Size()-npyHeaderLen, 0) / rowBytes
		// Keep whole chunks only (the rest is recomputed the same way).
		done = rows / int64(opts.ChunkRows) * int64(opts.ChunkRows)
		if old.Complete {
			done = rows
		}
	case errors.Is(err, os.ErrNotExist):
		if f, err = os.Create(path); err != nil {
			return st, fmt.Errorf("%s: %w", path, unwrapPath(err))
		}
	default:
		return st, fmt.Errorf("%s: %w", path, unwrapPath(err))
	}
	defer f.Close()
	meta.Complete = false
	if err := writeEmbedMeta(metaPath, meta); err != nil {
		return st, err
	}
	if err := f.Truncate(npyHeaderLen + done*rowBytes); err != nil {
		return st, err
	}
	if err := writeNPYHeader(f, done, d); err != nil {
		return st, err
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return st, err
	}
	st.Resumed = done
	if done > 0 && opts.Log != nil {
		fmt.Fprintf(opts.Log, "embeddings: resuming %s at row %d\n", path, done)
	}

	var total int64
	known := false
	if opts.Progress != nil {
		total, known = corpusRows(corpus)
	}
	rows := done
	var texts []string
	buf := make([]byte, 0, opts.ChunkRows*int(rowBytes))
	flush := func() error {
		if len(texts) == 0 {
			return nil
		}
		vecs, err := enc.Passages().Embed(ctx, texts)
		if err != nil {
			return err
		}
		buf = buf[:0]
		for _, v := range vecs {
			for _, x := range v {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
			}
		}
		if _, err := f.Write(buf); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		rows += int64(len(texts))
		texts = texts[:0]
		if err := writeNPYHeader(f, rows, d); err != nil {
			return err
		}
		if _, err := f.Seek(0, io.SeekEnd); err != nil {
			return err
		}
		secs := time.Since(start).Seconds()
		line := countLine("embedding", rows, total, known, start)
		if known && rows > done {
			// The ETA counts only this run's rate (a resumed run starts at done).
			frac := float64(rows-done) / float64(max(total-done, 1))
			line = fmt.Sprintf("embedding: %d/%d passages (%.0f%%), %s", rows, total, 100*float64(rows)/float64(total), cli.ETA(time.Since(start), frac))
		}
		opts.Progress.Printf("%s (%.1f/s)", line, float64(rows-done)/secs)
		if opts.AfterChunk != nil {
			return opts.AfterChunk(rows)
		}
		return nil
	}
	var seen int64 // passages read (EachPassage's row is a line number)
	err = EachPassage(corpus, func(_ int, p Passage) error {
		seen++
		if seen <= done {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		texts = append(texts, p.Contents)
		if len(texts) == opts.ChunkRows {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return st, err
	}
	if err := f.Sync(); err != nil {
		return st, err
	}
	meta.Complete = true
	if err := writeEmbedMeta(metaPath, meta); err != nil {
		return st, err
	}
	st.Rows = rows
	st.Seconds = time.Since(start).Seconds()
	opts.Progress.Done("embedded %d passages", rows)
	return st, nil
}

func (m embedMeta) sameRun(n embedMeta) bool {
	m.Complete, n.Complete = false, false
	return m == n
}

func (m embedMeta) describe() string {
	compute := m.Compute
	if compute == "" {
		compute = "cpu"
	}
	return fmt.Sprintf("corpus %s, model %s, family %s, pooling %s, max length %d, batch %d, chunk %d, dim %d, device %s",
		m.Corpus, m.Model, m.Family, m.Pooling, m.MaxLength, m.BatchSize, m.ChunkRows, m.Dim, compute)
}

// computeOf is the sidecar's Compute of an encoder.
func computeOf(e *encoder.Encoder) string {
	if e.Device == "cpu" || e.Device == "" {
		return ""
	}
	return e.Device + " " + string(e.Precision)
}

func readEmbedMeta(path string) (embedMeta, error) {
	var m embedMeta
	data, err := os.ReadFile(path)
	if err != nil {
		return m, unwrapPath(err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, err
	}
	return m, nil
}

func writeEmbedMeta(path string, m embedMeta) error {
	data, _ := json.MarshalIndent(m, "", "  ")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// writeNPYHeader writes a version 1.0 .npy header of exactly npyHeaderLen
// bytes for a float32 [rows, d] array at the start of f.
func writeNPYHeader(f *os.File, rows int64, d int) error {
	dict := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", rows, d)
	pad := npyHeaderLen - 10 - len(dict) - 1
	if pad < 0 {
		return fmt.Errorf("npy header for (%d, %d) does not fit", rows, d)
	}
	h := make([]byte, 0, npyHeaderLen)
	h = append(h, "\x93NUMPY\x01\x00"...)
	h = binary.LittleEndian.AppendUint16(h, uint16(npyHeaderLen-10))
	h = append(h, dict...)
	for i := 0; i < pad; i++ {
		h = append(h, ' ')
	}
	h = append(h, '\n')
	_, err := f.WriteAt(h, 0)
	return err
}
