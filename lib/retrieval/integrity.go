package retrieval

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// FileSum is what index.json records of each file of the directory: its size
// and CRC-32C (Castagnoli, hex), so that a truncated download, a short copy
// or a flipped byte is found when the index is opened rather than when a
// query reaches the damaged part.
type FileSum struct {
	Bytes  int64  `json:"bytes"`
	CRC32C string `json:"crc32c"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sumFile syncs path to disk (it is about to be renamed into place) and
// returns its size and checksum.
func sumFile(path string) (FileSum, error) {
	f, err := os.Open(path)
	if err != nil {
		return FileSum{}, err
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, f)
	if err != nil {
		return FileSum{}, fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return FileSum{}, fmt.Errorf("%s: %w", path, err)
	}
	return FileSum{Bytes: n, CRC32C: fmt.Sprintf("%08x", h.Sum32())}, nil
}

// sumDir sums every regular file of a built index directory but the
// manifest.
func sumDir(dir string) (map[string]FileSum, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]FileSum{}
	for _, e := range ents {
		if !e.Type().IsRegular() || e.Name() == ManifestFile {
			continue
		}
		s, err := sumFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out[e.Name()] = s
	}
	return out, nil
}

// checkSizes compares every file index.json lists with the directory: a file
// missing, shorter or longer than recorded is an error naming it. Indexes
// written before index.json had "files" are not checked here.
func checkSizes(dir string, files map[string]FileSum) error {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(dir, n)
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("%s: %w (index.json lists it; rebuild or download the index again)", p, unwrapPath(err))
		}
		if want := files[n].Bytes; st.Size() != want {
			return fmt.Errorf("%s: %d bytes, index.json records %d (truncated or replaced; rebuild or download the index again)", p, st.Size(), want)
		}
	}
	return nil
}

// checkSum verifies one file's checksum against index.json; data, when not
// nil, is the file's contents already in memory (a mapping).
func checkSum(dir, name string, files map[string]FileSum, data []byte) error {
	want, ok := files[name]
	if !ok {
		return nil
	}
	p := filepath.Join(dir, name)
	var got string
	if data != nil {
		got = fmt.Sprintf("%08x", crc32.Checksum(data, castagnoli))
	} else {
		s, err := sumFile(p)
		if err != nil {
			return err
		}
		got = s.CRC32C
	}
	if got != want.CRC32C {
		return fmt.Errorf("%s: checksum crc32c %s, index.json records %s (the file is damaged; rebuild or download the index again)", p, got, want.CRC32C)
	}
	return nil
}

// Verify checks the checksum of every file index.json lists, the docstore
// and the dense index included (Open checks those two by size only: they
// can be tens of gigabytes).
func (ix *Index) Verify() error {
	names := make([]string, 0, len(ix.Manifest.Files))
	for n := range ix.Manifest.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := checkSum(ix.Dir, n, ix.Manifest.Files, nil); err != nil {
			return err
		}
	}
	return nil
}

// checkLexicon walks every lexicon entry once: term strings and postings
// ranges must lie inside their files and terms must be sorted, so that no
// lookup can index past a mapping, whatever the files hold.
func (s *BM25) checkLexicon(lexPath string) error {
	prevOff, prevLen := uint64(0), uint32(0)
	for i := 0; i < s.nterms; i++ {
		e := s.entry(i)
		soff := binary.LittleEndian.Uint64(e[0:])
		poff := binary.LittleEndian.Uint64(e[8:])
		plen := binary.LittleEndian.Uint64(e[16:])
		slen := binary.LittleEndian.Uint32(e[28:])
		if soff > uint64(len(s.strs)) || uint64(slen) > uint64(len(s.strs))-soff {
			return fmt.Errorf("%s: term %d: string at %d+%d past the end of the lexicon (damaged)", lexPath, i, soff, slen)
		}
		if poff > uint64(len(s.post)) || plen > uint64(len(s.post))-poff {
			return fmt.Errorf("%s: term %d: postings at %d+%d past the end of %s (%d bytes; damaged or truncated)", lexPath, i, poff, plen, bm25PostFile, len(s.post))
		}
		if i > 0 && string(s.strs[prevOff:prevOff+uint64(prevLen)]) >= string(s.strs[soff:soff+uint64(slen)]) {
			return fmt.Errorf("%s: term %d out of order (damaged)", lexPath, i)
		}
		prevOff, prevLen = soff, slen
	}
	return nil
}

// checkBM25 verifies the BM25 files: their checksums (they are mapped and
// read by every query anyway), the lexicon's entries and its term count.
func (ix *Index) checkBM25() error {
	s, files := ix.BM25, ix.Manifest.Files
	for _, f := range []struct {
		name string
		data []byte
	}{{bm25LenFile, s.lens}, {bm25LexFile, s.lex}, {bm25PostFile, s.post}} {
		if err := checkSum(ix.Dir, f.name, files, f.data); err != nil {
			return err
		}
	}
	lexPath := filepath.Join(ix.Dir, bm25LexFile)
	if t := ix.Manifest.BM25Stats.Terms; t != 0 && t != s.nterms {
		return fmt.Errorf("%s: %d terms, index.json records %d", lexPath, s.nterms, t)
	}
	return s.checkLexicon(lexPath)
}
