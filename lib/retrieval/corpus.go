package retrieval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/parquet-go/parquet-go"

	"github.com/mempo/mempo/lib/fileio"
)

// Passage is one corpus row in the wiki-18 layout.
type Passage struct {
	ID       string `json:"id" parquet:"id"`
	Contents string `json:"contents" parquet:"contents"`
}

// errStop ends a corpus scan early without an error.
var errStop = errors.New("stop")

// EachPassage streams the passages of a corpus file (JSONL `{"id","contents"}`
// or Parquet with string columns id and contents), calling fn with each one and
// its 1-based row. Bad rows give an error naming file, row and field.
func EachPassage(path string, fn func(row int, p Passage) error) error {
	format, err := fileio.Format(path)
	if err != nil {
		return err
	}
	if format == "parquet" {
		return eachParquetPassage(path, fn)
	}
	r, err := fileio.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	return fileio.EachJSONL(r, path, func(line int, raw []byte) error {
		p, err := parsePassage(path, line, raw)
		if err != nil {
			return err
		}
		return fn(line, p)
	})
}

func parsePassage(path string, line int, raw []byte) (Passage, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return Passage{}, fileio.BadInput(path, line, "", "not a JSON object: %v", err)
	}
	var p Passage
	idRaw, ok := m["id"]
	if !ok {
		return p, fileio.BadInput(path, line, "id", "missing")
	}
	var idNum json.Number
	if err := json.Unmarshal(idRaw, &p.ID); err != nil {
		d := json.NewDecoder(bytes.NewReader(idRaw))
		d.UseNumber()
		if err := d.Decode(&idNum); err != nil {
			return p, fileio.BadInput(path, line, "id", "want a string or a number, got %s", abbrev(idRaw))
		}
		p.ID = idNum.String()
	}
	cRaw, ok := m["contents"]
	if !ok {
		return p, fileio.BadInput(path, line, "contents", "missing")
	}
	if err := json.Unmarshal(cRaw, &p.Contents); err != nil {
		return p, fileio.BadInput(path, line, "contents", "want a string, got %s", abbrev(cRaw))
	}
	return p, nil
}

func abbrev(raw []byte) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "…"
	}
	return string(raw)
}

func eachParquetPassage(path string, fn func(row int, p Passage) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return fmt.Errorf("%s: not a Parquet file: %w", path, err)
	}
	schema := pf.Schema()
	for _, col := range []string{"id", "contents"} {
		leaf, ok := schema.Lookup(col)
		if !ok {
			return fileio.BadInput(path, 0, col, "column missing")
		}
		if k := leaf.Node.Type().Kind(); k != parquet.ByteArray && !(col == "id" && (k == parquet.Int64 || k == parquet.Int32)) {
			return fileio.BadInput(path, 0, col, "column type %v, want string", leaf.Node.Type())
		}
	}
	idLeaf, _ := schema.Lookup("id")
	cLeaf, _ := schema.Lookup("contents")
	row := 0
	for _, rg := range pf.RowGroups() {
		rows := rg.Rows()
		buf := make([]parquet.Row, 256)
		for {
			n, err := rows.ReadRows(buf)
			for _, r := range buf[:n] {
				row++
				var p Passage
				var hasID, hasC bool
				for _, v := range r {
					switch v.Column() {
					case idLeaf.ColumnIndex:
						if !v.IsNull() {
							hasID = true
							switch v.Kind() {
							case parquet.Int64:
								p.ID = strconv.FormatInt(v.Int64(), 10)
							case parquet.Int32:
								p.ID = strconv.FormatInt(int64(v.Int32()), 10)
							default:
								p.ID = string(v.ByteArray())
							}
						}
					case cLeaf.ColumnIndex:
						if !v.IsNull() {
							hasC = true
							p.Contents = string(v.ByteArray())
						}
					}
				}
				if !hasID {
					rows.Close()
					return fileio.BadInput(path, row, "id", "null")
				}
				if !hasC {
					rows.Close()
					return fileio.BadInput(path, row, "contents", "null")
				}
				if ferr := fn(row, p); ferr != nil {
					rows.Close()
					return ferr
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				rows.Close()
				return fmt.Errorf("%s: row %d: %w", path, row+1, err)
			}
		}
		rows.Close()
	}
	return nil
}
