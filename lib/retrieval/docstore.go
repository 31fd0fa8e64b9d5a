package retrieval

import (
	"database/sql"
	"fmt"
	"net/url"
	"runtime"
	"strings"

	_ "github.com/mattn/go-sqlite3" // SQLite driver for the docstore
)

// Doc is one passage as stored: the corpus id, the title parsed from the first
// line of contents, and contents exactly as the corpus gave it.
type Doc struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Contents string `json:"contents"`
}

// SplitContents parses the wiki-18 layout `"Title"\ntext`: the first line with
// its surrounding double quotes removed, and the remaining lines. Contents
// without a newline has no title.
func SplitContents(contents string) (title, text string) {
	i := strings.IndexByte(contents, '\n')
	if i < 0 {
		return "", contents
	}
	title = contents[:i]
	if len(title) >= 2 && title[0] == '"' && title[len(title)-1] == '"' {
		title = title[1 : len(title)-1]
	}
	return title, contents[i+1:]
}

// DocStore is the SQLite table of passages, addressed by internal row number
// (0-based, the order of the corpus), which is also the BM25 and FAISS id.
type DocStore struct {
	db  *sql.DB
	get *sql.Stmt
	n   int64
}

const docstoreFile = "docs.sqlite"

func openDocStore(path string) (*DocStore, error) {
	// immutable: an index directory never changes once built (rebuilds replace
	// the directory), so SQLite can skip locking entirely.
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?mode=ro&immutable=1"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	db.SetMaxOpenConns(2 * runtime.GOMAXPROCS(0))
	db.SetMaxIdleConns(2 * runtime.GOMAXPROCS(0))
	s := &DocStore{db: db}
	// Rows are 1..N with no gaps; MAX(rowid) reads one b-tree path where
	// COUNT(*) would scan the table (a slow start on a large index).
	if err := db.QueryRow("SELECT COALESCE(MAX(rowid), 0) FROM docs").Scan(&s.n); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s.get, err = db.Prepare("SELECT id, title, contents FROM docs WHERE rowid = ?")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Len is the number of passages.
func (s *DocStore) Len() int64 { return s.n }

// Get returns the passage with internal row number row (0-based).
func (s *DocStore) Get(row int64) (Doc, error) {
	var d Doc
	if err := s.get.QueryRow(row+1).Scan(&d.ID, &d.Title, &d.Contents); err != nil {
		return d, fmt.Errorf("docstore: row %d: %w", row, err)
	}
	return d, nil
}

// GetMany fetches several rows with one query; the result is in the order of
// rows (duplicates allowed).
func (s *DocStore) GetMany(rows []int64) ([]Doc, error) {
	out := make([]Doc, len(rows))
	if len(rows) == 0 {
		return out, nil
	}
	const chunk = 500
	pos := make(map[int64][]int, len(rows))
	for i, r := range rows {
		pos[r] = append(pos[r], i)
	}
	uniq := make([]any, 0, len(pos))
	for r := range pos {
		uniq = append(uniq, r+1)
	}
	for start := 0; start < len(uniq); start += chunk {
		part := uniq[start:min(start+chunk, len(uniq))]
		q := "SELECT rowid, id, title, contents FROM docs WHERE rowid IN (?" + strings.Repeat(",?", len(part)-1) + ")"
		rs, err := s.db.Query(q, part...)
		if err != nil {
			return nil, fmt.Errorf("docstore: %w", err)
		}
		for rs.Next() {
			var rowid int64
			var d Doc
			if err := rs.Scan(&rowid, &d.ID, &d.Title, &d.Contents); err != nil {
				rs.Close()
				return nil, fmt.Errorf("docstore: %w", err)
			}
			for _, i := range pos[rowid-1] {
				out[i] = d
			}
			delete(pos, rowid-1)
		}
		if err := rs.Close(); err != nil {
			return nil, fmt.Errorf("docstore: %w", err)
		}
	}
	for r := range pos {
		return nil, fmt.Errorf("docstore: row %d not found", r)
	}
	return out, nil
}

// Close releases the database.
func (s *DocStore) Close() error { return s.db.Close() }

// docWriter appends passages to a new docstore inside one build.
type docWriter struct {
	db   *sql.DB
	tx   *sql.Tx
	ins  *sql.Stmt
	n    int64
	path string
}

func createDocStore(path string) (*docWriter, error) {
	db, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_journal_mode=OFF&_synchronous=OFF")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		"PRAGMA page_size=8192",
		"PRAGMA cache_size=-65536",
		"CREATE TABLE docs (rowid INTEGER PRIMARY KEY, id TEXT NOT NULL, title TEXT NOT NULL, contents TEXT NOT NULL)",
	} {
		if _, err := db.Exec(q); err != nil {
			db.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	w := &docWriter{db: db, path: path}
	if err := w.begin(); err != nil {
		db.Close()
		return nil, err
	}
	return w, nil
}

func (w *docWriter) begin() error {
	var err error
	if w.tx, err = w.db.Begin(); err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	if w.ins, err = w.tx.Prepare("INSERT INTO docs (rowid, id, title, contents) VALUES (?, ?, ?, ?)"); err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	return nil
}

func (w *docWriter) add(id, title, contents string) error {
	w.n++
	if _, err := w.ins.Exec(w.n, id, title, contents); err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	if w.n%50000 == 0 {
		if err := w.commit(); err != nil {
			return err
		}
		return w.begin()
	}
	return nil
}

func (w *docWriter) commit() error {
	w.ins.Close()
	if err := w.tx.Commit(); err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	return nil
}

func (w *docWriter) close() error {
	if err := w.commit(); err != nil {
		w.db.Close()
		return err
	}
	return w.db.Close()
}

func (w *docWriter) abort() {
	if w.tx != nil {
		w.tx.Rollback()
	}
	w.db.Close()
}
