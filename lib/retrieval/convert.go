package retrieval

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/mempo/mempo/lib/fileio"
)

// QA layouts whose paragraphs ConvertCorpus collects.
const (
	FromHotpotQA = "hotpotqa" // context {title[], sentences[][]} or paragraphs [{title, text}]
	FromMuSiQue  = "musique"  // paragraphs [{title, paragraph_text}] or a corpus [{title, text}]
	From2Wiki    = "2wiki"    // context [[title, [sentences]]] or a corpus [{title, text}]
	FromFlashRAG = "flashrag" // corpus rows {id?, contents} or {title, text}
)

// Sources lists the accepted --from values.
var Sources = []string{FromHotpotQA, FromMuSiQue, From2Wiki, FromFlashRAG}

// ConvertStats counts what ConvertCorpus did.
type ConvertStats struct {
	Records    int // QA records or corpus rows read
	Paragraphs int // paragraphs seen
	Passages   int // distinct passages written
}

// ConvertCorpus reads multi-hop QA files (JSONL, or a JSON array) of one
// layout and writes their paragraphs as a deduplicated wiki-18-style corpus:
// {"id": "<row>", "contents": "\"Title\"\ntext"}, in order of first
// appearance. Two paragraphs are the same when title and text are.
func ConvertCorpus(from string, files []string, w io.Writer) (ConvertStats, error) {
	var st ConvertStats
	valid := false
	for _, s := range Sources {
		valid = valid || s == from
	}
	if !valid {
		return st, fmt.Errorf("--from %q: want one of %s", from, strings.Join(Sources, ", "))
	}
	seen := map[[32]byte]bool{}
	out := fileio.NewJSONLWriter(w)
	emit := func(title, text string) error {
		st.Paragraphs++
		title, text = strings.TrimSpace(title), strings.TrimSpace(text)
		h := sha256.Sum256([]byte(title + "\x00" + text))
		if seen[h] {
			return nil
		}
		seen[h] = true
		contents := "\"" + title + "\"\n" + text
		if err := out.Write(Passage{ID: strconv.Itoa(st.Passages), Contents: contents}); err != nil {
			return err
		}
		st.Passages++
		return nil
	}
	for _, file := range files {
		err := eachRecord(file, func(row int, rec map[string]json.RawMessage) error {
			st.Records++
			return paragraphsOf(from, file, row, rec, emit)
		})
		if err != nil {
			return st, err
		}
	}
	return st, out.Flush()
}

// eachRecord calls fn for every object of a JSONL file or a JSON array file.
func eachRecord(file string, fn func(row int, rec map[string]json.RawMessage) error) error {
	r, err := fileio.Open(file)
	if err != nil {
		return err
	}
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	first, err := peekNonSpace(br)
	if err != nil {
		if err == io.EOF {
			return nil
		}
		return fmt.Errorf("%s: %w", file, err)
	}
	if first == '[' {
		dec := json.NewDecoder(br)
		if _, err := dec.Token(); err != nil {
			return fileio.BadInput(file, 0, "", "bad JSON: %v", err)
		}
		row := 0
		for dec.More() {
			row++
			var rec map[string]json.RawMessage
			if err := dec.Decode(&rec); err != nil {
				return fileio.BadInput(file, row, "", "record is not a JSON object: %v", err)
			}
			if err := fn(row, rec); err != nil {
				return err
			}
		}
		return nil
	}
	return fileio.EachJSONL(br, file, func(line int, raw []byte) error {
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(raw, &rec); err != nil {
			return fileio.BadInput(file, line, "", "not a JSON object: %v", err)
		}
		return fn(line, rec)
	})
}

func peekNonSpace(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.Peek(1)
		if err != nil {
			return 0, err
		}
		if !bytes.ContainsAny(b, " \t\r\n\ufeff") && b[0] != 0xef && b[0] != 0xbb && b[0] != 0xbf {
			return b[0], nil
		}
		br.Discard(1)
	}
}

func field[T any](file string, row int, rec map[string]json.RawMessage, name string, dst *T) (bool, error) {
	raw, ok := rec[name]
	if !ok || string(raw) == "null" {
		return false, nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return false, fileio.BadInput(file, row, name, "unexpected shape: %v", shortErr(err))
	}
	return true, nil
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.Index(s, "json: "); i >= 0 {
		s = s[i+6:]
	}
	return s
}

type titleText struct {
	Title         string  `json:"title"`
	Text          *string `json:"text"`
	ParagraphText *string `json:"paragraph_text"`
	Contents      *string `json:"contents"`
}

func paragraphsOf(from, file string, row int, rec map[string]json.RawMessage, emit func(title, text string) error) error {
	switch from {
	case FromHotpotQA:
		// {"context": {"title": [...], "sentences": [[...], ...]}} (distractor
		// setting as distributed by HuggingFace) or the original list form
		// [[title, [sentences]]], or {"paragraphs": [{title, text}]}.
		if raw, ok := rec["context"]; ok {
			return contextParagraphs(file, row, raw, emit)
		}
		if _, ok := rec["paragraphs"]; ok {
			return listParagraphs(file, row, rec, "paragraphs", emit)
		}
		if _, ok := rec["title"]; ok {
			return corpusRow(file, row, rec, emit)
		}
		return fileio.BadInput(file, row, "context", "missing (want context or paragraphs)")
	case FromMuSiQue:
		if _, ok := rec["paragraphs"]; ok {
			return listParagraphs(file, row, rec, "paragraphs", emit)
		}
		if _, ok := rec["title"]; ok {
			return corpusRow(file, row, rec, emit)
		}
		return fileio.BadInput(file, row, "paragraphs", "missing (want paragraphs, or title and text)")
	case From2Wiki:
		if raw, ok := rec["context"]; ok {
			return contextParagraphs(file, row, raw, emit)
		}
		if _, ok := rec["title"]; ok {
			return corpusRow(file, row, rec, emit)
		}
		return fileio.BadInput(file, row, "context", "missing (want context, or title and text)")
	case FromFlashRAG:
		if c, ok := rec["contents"]; ok {
			var contents string
			if err := json.Unmarshal(c, &contents); err != nil {
				return fileio.BadInput(file, row, "contents", "want a string")
			}
			title, text := SplitContents(contents)
			if !strings.Contains(contents, "\n") {
				return fileio.BadInput(file, row, "contents", "no title line (want \"Title\\ntext\")")
			}
			return emit(title, text)
		}
		if _, ok := rec["title"]; ok {
			return corpusRow(file, row, rec, emit)
		}
		return fileio.BadInput(file, row, "contents", "missing (want contents, or title and text)")
	}
	return nil
}

func corpusRow(file string, row int, rec map[string]json.RawMessage, emit func(title, text string) error) error {
	var title, text string
	if _, err := field(file, row, rec, "title", &title); err != nil {
		return err
	}
	ok, err := field(file, row, rec, "text", &text)
	if err != nil {
		return err
	}
	if !ok {
		if ok, err = field(file, row, rec, "paragraph_text", &text); err != nil {
			return err
		}
	}
	if !ok {
		return fileio.BadInput(file, row, "text", "missing")
	}
	return emit(title, text)
}

func listParagraphs(file string, row int, rec map[string]json.RawMessage, name string, emit func(title, text string) error) error {
	var ps []titleText
	if _, err := field(file, row, rec, name, &ps); err != nil {
		return err
	}
	for i, p := range ps {
		var text *string
		switch {
		case p.Text != nil:
			text = p.Text
		case p.ParagraphText != nil:
			text = p.ParagraphText
		case p.Contents != nil:
			title, body := SplitContents(*p.Contents)
			if err := emit(title, body); err != nil {
				return err
			}
			continue
		default:
			return fileio.BadInput(file, row, fmt.Sprintf("%s[%d].text", name, i), "missing")
		}
		if err := emit(p.Title, *text); err != nil {
			return err
		}
	}
	return nil
}

func contextParagraphs(file string, row int, raw json.RawMessage, emit func(title, text string) error) error {
	var dict struct {
		Title     []string   `json:"title"`
		Sentences [][]string `json:"sentences"`
	}
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &dict); err != nil {
			return fileio.BadInput(file, row, "context", "unexpected shape: %v", shortErr(err))
		}
		if len(dict.Title) != len(dict.Sentences) {
			return fileio.BadInput(file, row, "context", "%d titles but %d sentence lists", len(dict.Title), len(dict.Sentences))
		}
		for i, t := range dict.Title {
			if err := emit(t, joinSentences(dict.Sentences[i])); err != nil {
				return err
			}
		}
		return nil
	}
	var list [][2]json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return fileio.BadInput(file, row, "context", "want {title[], sentences[][]} or [[title, [sentences]]]: %v", shortErr(err))
	}
	for i, p := range list {
		var title string
		var sents []string
		if err := json.Unmarshal(p[0], &title); err != nil {
			return fileio.BadInput(file, row, fmt.Sprintf("context[%d][0]", i), "want a title string")
		}
		if err := json.Unmarshal(p[1], &sents); err != nil {
			return fileio.BadInput(file, row, fmt.Sprintf("context[%d][1]", i), "want a list of sentences")
		}
		if err := emit(title, joinSentences(sents)); err != nil {
			return err
		}
	}
	return nil
}

// joinSentences concatenates sentences; HotpotQA's carry their own leading
// spaces, 2Wiki's do not, so a space is added only where none is present.
func joinSentences(s []string) string {
	var b strings.Builder
	for i, x := range s {
		if i > 0 && len(x) > 0 && x[0] != ' ' && b.Len() > 0 && !strings.HasSuffix(b.String(), " ") {
			b.WriteByte(' ')
		}
		b.WriteString(x)
	}
	return b.String()
}
