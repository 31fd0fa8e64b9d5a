package report

import (
	"fmt"
	"html"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mempo/mempo/lib/fileio"
)

// captions say what each figure shows, for the index pages.
var captions = map[string]string{
	"f1_vs_k.png": "F1 (mean over the k objectives, ×100) against the number of objectives k, one line per run " +
		"(per run and data source when a run covers several), with 95% bootstrap intervals as error bars. " +
		"Runs are shifted slightly sideways so that equal values stay visible; with a single k the runs are points side by side.",
	"peak_tokens_vs_k.png": "Peak tokens per trajectory (max over steps of context + output) against k, with 95% intervals: " +
		"how the context grows with the number of objectives under each run's memory.",
	"reward.png": "Mean task reward R^T of the rollouts each update trained on, against the update step (the metrics rows " +
		"hold means only: no interval).",
	"memory_reward.png": "Mean memory reward R^M over the memory blocks of the rollouts each update trained on; a run that " +
		"did not compute it (GRPO) is named in the legend as not computed, not drawn as 0.",
	"peak_tokens_updates.png": "Mean peak tokens of the trajectories of each update's mini-batch, against the update step.",
}

// WriteIndex writes index.md and index.html into dir: every table and figure
// of the report (files, the paths written by Run, in dir), each figure with
// a caption, and links to the reports in dir's subdirectories that have an
// index of their own (the demo's train/). The HTML page needs nothing but
// the files beside it: tables are inlined, figures are relative <img>s.
func WriteIndex(dir string, files []string) ([]string, error) {
	var tables, figures []string
	for _, f := range files {
		switch strings.ToLower(filepath.Ext(f)) {
		case ".md":
			tables = append(tables, filepath.Base(f))
		case ".png":
			figures = append(figures, filepath.Base(f))
		}
	}
	var subs []string
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			if _, err := os.Stat(filepath.Join(dir, e.Name(), "index.html")); e.IsDir() && err == nil {
				subs = append(subs, e.Name())
			}
		}
	}
	slices.Sort(subs)

	var md, h strings.Builder
	title := "mempo-score report"
	fmt.Fprintf(&md, "# %s\n\n", title)
	fmt.Fprintf(&h, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title>\n<style>%s</style></head><body>\n<h1>%s</h1>\n",
		title, indexCSS, title)
	if len(subs) > 0 {
		md.WriteString("Other reports: ")
		h.WriteString("<p>Other reports: ")
		for i, s := range subs {
			sep := ""
			if i > 0 {
				sep = ", "
			}
			fmt.Fprintf(&md, "%s[%s/](%s/index.md)", sep, s, s)
			fmt.Fprintf(&h, "%s<a href=\"%s/index.html\">%s/</a>", sep, html.EscapeString(s), html.EscapeString(s))
		}
		md.WriteString("\n\n")
		h.WriteString("</p>\n")
	}
	md.WriteString("## Tables\n\n")
	h.WriteString("<h2>Tables</h2>\n")
	for _, t := range tables {
		fmt.Fprintf(&md, "- [%s](%s)\n", t, t)
		raw, err := os.ReadFile(filepath.Join(dir, t))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&h, "<h3><a href=\"%s\">%s</a></h3>\n%s", html.EscapeString(t), html.EscapeString(t), markdownHTML(string(raw)))
	}
	md.WriteString("\n## Figures\n\n")
	h.WriteString("<h2>Figures</h2>\n")
	for i, f := range figures {
		cap := captions[f]
		fmt.Fprintf(&md, "### Figure %d: %s\n\n![%s](%s)\n\n%s\n\n", i+1, f, f, f, cap)
		fmt.Fprintf(&h, "<figure><img src=\"%s\" alt=\"%s\"><figcaption><b>Figure %d</b> (%s). %s</figcaption></figure>\n",
			html.EscapeString(f), html.EscapeString(f), i+1, html.EscapeString(f), html.EscapeString(cap))
	}
	h.WriteString("</body></html>\n")
	mdPath, htmlPath := filepath.Join(dir, "index.md"), filepath.Join(dir, "index.html")
	if err := fileio.WriteFileAtomic(mdPath, []byte(md.String())); err != nil {
		return nil, err
	}
	if err := fileio.WriteFileAtomic(htmlPath, []byte(h.String())); err != nil {
		return []string{mdPath}, err
	}
	return []string{mdPath, htmlPath}, nil
}

const indexCSS = `body{font-family:sans-serif;max-width:72em;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #bbb;padding:2px 8px}
td.r{text-align:right;font-variant-numeric:tabular-nums}figure{margin:1.5em 0}img{max-width:100%}
figcaption{max-width:48em;font-size:0.92em}`

// markdownHTML renders the markdown this package writes (### headings, pipe
// tables with a |---:| alignment row, paragraphs) as HTML.
func markdownHTML(md string) string {
	var b strings.Builder
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		switch {
		case l == "":
		case strings.HasPrefix(l, "#"):
			hashes := len(l) - len(strings.TrimLeft(l, "#"))
			n := min(hashes+1, 6) // under the page's own h1/h2/h3
			fmt.Fprintf(&b, "<h%d>%s</h%d>\n", n, html.EscapeString(strings.TrimSpace(l[hashes:])), n)
		case strings.HasPrefix(l, "|"):
			var rows [][]string
			for ; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|"); i++ {
				rows = append(rows, cells(lines[i]))
			}
			i--
			var right []bool
			if len(rows) > 1 && strings.Trim(strings.Join(rows[1], ""), "-:") == "" {
				for _, c := range rows[1] {
					right = append(right, strings.HasSuffix(c, ":"))
				}
				rows = append(rows[:1], rows[2:]...)
			}
			b.WriteString("<table>\n")
			for r, row := range rows {
				b.WriteString("<tr>")
				for c, cell := range row {
					tag, class := "td", ""
					if r == 0 {
						tag = "th"
					} else if c < len(right) && right[c] {
						class = ` class="r"`
					}
					fmt.Fprintf(&b, "<%s%s>%s</%s>", tag, class, html.EscapeString(strings.ReplaceAll(cell, `\|`, "|")), tag)
				}
				b.WriteString("</tr>\n")
			}
			b.WriteString("</table>\n")
		default:
			fmt.Fprintf(&b, "<p>%s</p>\n", html.EscapeString(l))
		}
	}
	return b.String()
}

// cells splits a pipe-table row, keeping escaped pipes inside cells.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	var out []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		if line[i] == '\\' && i+1 < len(line) && line[i+1] == '|' {
			cur.WriteString(`\|`)
			i++
			continue
		}
		if line[i] == '|' {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteByte(line[i])
	}
	return append(out, strings.TrimSpace(cur.String()))
}
