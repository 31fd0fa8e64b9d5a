package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/cmd/internal/flags"
	"github.com/mempo/mempo/lib/cli"
	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/retrieval"
)

// indexApp is the mempo-index command: build an index directory, or (the
// corpus subcommand) turn QA paragraphs into a corpus.
func indexApp() *ucli.App {
	app := cli.App("mempo-index", "build a retrieval index (docstore, BM25, optional FAISS) from a corpus",
		"mempo-index --corpus wiki18.jsonl --out index/\n"+
			"mempo-index --corpus wiki18.jsonl --faiss-read e5_Flat.index --out index/\n"+
			"mempo-index --corpus wiki18.jsonl --encoder e5-base-v2/ --out index/\n"+
			"mempo-index corpus --from hotpotqa dev-with-paragraphs-*.jsonl --out corpus.jsonl")
	app.Flags = []ucli.Flag{
		&ucli.StringFlag{Name: "corpus", Usage: "corpus `FILE`: JSONL {\"id\",\"contents\"} (wiki-18) or Parquet with those columns"},
		&ucli.StringFlag{Name: "out", Usage: "index `DIR` to write (replaced only when the new one is complete)"},
		&ucli.Float64Flag{Name: "k1", Value: retrieval.DefaultBM25.K1, Usage: "BM25 k1"},
		&ucli.Float64Flag{Name: "b", Value: retrieval.DefaultBM25.B, Usage: "BM25 b"},
		&ucli.BoolFlag{Name: "stopwords", Value: retrieval.DefaultAnalyzer.Stopwords, Usage: "drop Lucene's English stopwords (--stopwords=false keeps them)"},
		&ucli.BoolFlag{Name: "stem", Value: retrieval.DefaultAnalyzer.Stem, Usage: "Porter-stem terms (--stem=false keeps surface forms)"},
		&ucli.IntFlag{Name: "run-mb", Value: 64, Usage: "memory for buffered postings before a run is spilled to disk (MiB)"},
		&ucli.StringFlag{Name: "embeddings", Usage: "passage embeddings `FILE`: .npy float32 [N, d] or Parquet list<float>, row i = corpus row i"},
		&ucli.StringFlag{Name: "embeddings-column", Value: "embedding", Usage: "Parquet column of the embeddings"},
		&ucli.StringFlag{Name: "faiss", Value: "Flat", Usage: "faiss index_factory `STRING` for --embeddings (Flat, HNSW32, IVF4096,Flat, ...), inner product"},
		&ucli.IntFlag{Name: "faiss-train", Value: 262144, Usage: "vectors used to train IVF/PQ indexes"},
		&ucli.StringFlag{Name: "faiss-read", Usage: "adopt a FAISS index `FILE` written by Python faiss for this corpus (e.g. e5_Flat.index)"},
		&ucli.StringFlag{Name: "embeddings-out", Usage: "with --encoder: the .npy `FILE` passage embeddings stream to, resumed after a kill (default OUT.embeddings.npy)"},
		&ucli.IntFlag{Name: "embed-chunk", Value: 1024, Usage: "with --encoder: passages embedded and written at a time (the unit of resumption)"},
		&ucli.BoolFlag{Name: "force", Usage: "replace an existing non-empty --out directory that is not an index"},
	}
	app.Flags = append(app.Flags, flags.EncoderFlags()...)
	app.Action = func(c *ucli.Context) error {
		if c.NArg() > 0 {
			return fmt.Errorf("unexpected argument %q (flags go before arguments; see --help)", c.Args().First())
		}
		if err := cli.Require(c, "corpus", "out"); err != nil {
			return err
		}
		if c.Int("run-mb") <= 0 {
			return fmt.Errorf("--run-mb must be positive")
		}
		if err := fileio.CheckReplaceable("out", c.String("out"), c.Bool("force"), retrieval.ManifestFile); err != nil {
			return err
		}
		start := time.Now()
		enc, err := flags.LoadEncoder(c)
		if err != nil {
			return err
		}
		embeddings := c.String("embeddings")
		if enc != nil {
			if embeddings != "" || c.String("faiss-read") != "" {
				return fmt.Errorf("--encoder excludes --embeddings and --faiss-read")
			}
			embeddings = c.String("embeddings-out")
			if embeddings == "" {
				embeddings = defaultEmbeddingsPath(c.String("out"))
			}
			fmt.Fprintln(os.Stderr, "mempo-index: "+flags.DescribeEncoder(enc, c.String("encoder")))
			st, err := retrieval.EmbedCorpus(context.Background(), enc, c.String("corpus"), embeddings, retrieval.EmbedOptions{
				ChunkRows: c.Int("embed-chunk"), Model: c.String("encoder"), Progress: cli.NewProgress(), Log: os.Stderr})
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "mempo-index: embedded %d passages (%d kept from an earlier run) → %s in %.1fs (%.1f passages/s)\n",
				st.Rows, st.Resumed, embeddings, st.Seconds, float64(st.Rows-st.Resumed)/max(st.Seconds, 1e-9))
		}
		m, err := retrieval.Build(context.Background(), retrieval.BuildOptions{
			Corpus: c.String("corpus"), Out: c.String("out"),
			Analyzer:   retrieval.Analyzer{Stopwords: c.Bool("stopwords"), Stem: c.Bool("stem")},
			BM25:       retrieval.BM25Params{K1: c.Float64("k1"), B: c.Float64("b")},
			RunBytes:   c.Int("run-mb") << 20,
			Embeddings: embeddings, EmbeddingsColumn: c.String("embeddings-column"),
			Faiss: c.String("faiss"), TrainSize: c.Int("faiss-train"), FaissRead: c.String("faiss-read"),
			Progress: cli.NewProgress(),
		})
		if err != nil {
			return err
		}
		secs := time.Since(start).Seconds()
		dense := ""
		if m.Dense != nil {
			dense = fmt.Sprintf(", dense %d×%d", m.Dense.Ntotal, m.Dense.Dim)
		}
		fmt.Fprintf(os.Stderr, "mempo-index: %d passages, %d terms%s → %s in %.1fs (%.0f passages/s; CPU %.1fs; peak RSS %d MiB)\n",
			m.Docs, m.BM25Stats.Terms, dense, c.String("out"), secs, float64(m.Docs)/secs, m.CPUSeconds, m.PeakRSSBytes>>20)
		return nil
	}
	app.Commands = []*ucli.Command{{
		Name:      "corpus",
		Usage:     "turn the paragraphs of multi-hop QA files into a deduplicated wiki-18-style corpus",
		ArgsUsage: "FILE...",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "from", Usage: "input layout: " + strings.Join(retrieval.Sources, "|")},
			&ucli.StringFlag{Name: "out", Value: "-", Usage: "output corpus `FILE` (.jsonl; - for stdout)"},
		},
		Action: func(c *ucli.Context) error {
			// Flags may also follow the files (urfave/cli stops at the first
			// argument): mempo-index corpus --from hotpotqa a.jsonl --out c.jsonl
			from, outPath := c.String("from"), c.String("out")
			files, err := trailingFlags(c.Args().Slice(), map[string]*string{"from": &from, "out": &outPath})
			if err != nil {
				return fmt.Errorf("corpus: %w", err)
			}
			if len(files) == 0 {
				return fmt.Errorf("corpus: give at least one input FILE")
			}
			if from == "" {
				return fmt.Errorf("%w (%s)", cli.MissingFlags("--from"), strings.Join(retrieval.Sources, "|"))
			}
			if f, err := fileio.Format(outPath); err != nil || f != "jsonl" {
				return fmt.Errorf("corpus: --out %s: want a .jsonl file or -", outPath)
			}
			out, err := fileio.Create(outPath)
			if err != nil {
				return err
			}
			defer out.Abort()
			st, err := retrieval.ConvertCorpus(from, files, out)
			if err != nil {
				return err
			}
			if st.Passages == 0 {
				return fmt.Errorf("corpus: no passages in %d records of %s; --out %s left as it was", st.Records, strings.Join(files, ", "), outPath)
			}
			if err := out.Commit(); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "mempo-index corpus: %d records, %d paragraphs → %d distinct passages\n", st.Records, st.Paragraphs, st.Passages)
			return nil
		},
	}}
	return app
}

// trailingFlags pulls "--name value" and "--name=value" for the given string
// flags out of positional arguments and returns the rest.
func trailingFlags(args []string, flags map[string]*string) ([]string, error) {
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			rest = append(rest, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		dst, ok := flags[name]
		if !ok {
			return nil, fmt.Errorf("unknown flag %s", a)
		}
		if !hasVal {
			if i+1 >= len(args) {
				return nil, fmt.Errorf("flag %s needs a value", a)
			}
			i++
			val = args[i]
		}
		*dst = val
	}
	return rest, nil
}

// defaultEmbeddingsPath is where mempo-index --encoder streams embeddings
// unless --embeddings-out says otherwise: beside the index directory, so
// that it survives a failed or interrupted build.
func defaultEmbeddingsPath(out string) string {
	return strings.TrimRight(filepath.Clean(out), string(filepath.Separator)) + ".embeddings.npy"
}
