package retrieval

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/cli"
	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/fileio"
)

// IndexApp is the mempo-index command: build an index directory, or (the
// corpus subcommand) turn QA paragraphs into a corpus.
func IndexApp() *ucli.App {
	app := cli.App("mempo-index", "build a retrieval index (docstore, BM25, optional FAISS) from a corpus",
		"mempo-index --corpus wiki18.jsonl --out index/\n"+
			"mempo-index --corpus wiki18.jsonl --faiss-read e5_Flat.index --out index/\n"+
			"mempo-index --corpus wiki18.jsonl --encoder e5-base-v2/ --out index/\n"+
			"mempo-index corpus --from hotpotqa dev-with-paragraphs-*.jsonl --out corpus.jsonl")
	app.Flags = []ucli.Flag{
		&ucli.StringFlag{Name: "corpus", Usage: "corpus `FILE`: JSONL {\"id\",\"contents\"} (wiki-18) or Parquet with those columns"},
		&ucli.StringFlag{Name: "out", Usage: "index `DIR` to write (replaced only when the new one is complete)"},
		&ucli.Float64Flag{Name: "k1", Value: DefaultBM25.K1, Usage: "BM25 k1"},
		&ucli.Float64Flag{Name: "b", Value: DefaultBM25.B, Usage: "BM25 b"},
		&ucli.BoolFlag{Name: "stopwords", Value: DefaultAnalyzer.Stopwords, Usage: "drop Lucene's English stopwords (--stopwords=false keeps them)"},
		&ucli.BoolFlag{Name: "stem", Value: DefaultAnalyzer.Stem, Usage: "Porter-stem terms (--stem=false keeps surface forms)"},
		&ucli.IntFlag{Name: "run-mb", Value: 64, Usage: "memory for buffered postings before a run is spilled to disk (MiB)"},
		&ucli.StringFlag{Name: "embeddings", Usage: "passage embeddings `FILE`: .npy float32 [N, d] or Parquet list<float>, row i = corpus row i"},
		&ucli.StringFlag{Name: "embeddings-column", Value: "embedding", Usage: "Parquet column of the embeddings"},
		&ucli.StringFlag{Name: "faiss", Value: "Flat", Usage: "faiss index_factory `STRING` for --embeddings (Flat, HNSW32, IVF4096,Flat, ...), inner product"},
		&ucli.IntFlag{Name: "faiss-train", Value: 262144, Usage: "vectors used to train IVF/PQ indexes"},
		&ucli.StringFlag{Name: "faiss-read", Usage: "adopt a FAISS index `FILE` written by Python faiss for this corpus (e.g. e5_Flat.index)"},
		&ucli.StringFlag{Name: "embeddings-out", Usage: "with --encoder: the .npy `FILE` passage embeddings stream to, resumed after a kill (default OUT.embeddings.npy)"},
		&ucli.IntFlag{Name: "embed-chunk", Value: 1024, Usage: "with --encoder: passages embedded and written at a time (the unit of resumption)"},
	}
	app.Flags = append(app.Flags, encoderFlags()...)
	app.Action = func(c *ucli.Context) error {
		if c.NArg() > 0 {
			return fmt.Errorf("unexpected argument %q (flags go before arguments; see --help)", c.Args().First())
		}
		if c.String("corpus") == "" || c.String("out") == "" {
			return fmt.Errorf("--corpus and --out are required")
		}
		if c.Int("run-mb") <= 0 {
			return fmt.Errorf("--run-mb must be positive")
		}
		start := time.Now()
		enc, err := loadEncoder(c)
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
			fmt.Fprintln(os.Stderr, "mempo-index: "+describeEncoder(enc, c.String("encoder")))
			st, err := EmbedCorpus(context.Background(), enc, c.String("corpus"), embeddings, EmbedOptions{
				ChunkRows: c.Int("embed-chunk"), Model: c.String("encoder"), Progress: cli.NewProgress(), Log: os.Stderr})
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "mempo-index: embedded %d passages (%d kept from an earlier run) → %s in %.1fs (%.1f passages/s)\n",
				st.Rows, st.Resumed, embeddings, st.Seconds, float64(st.Rows-st.Resumed)/max(st.Seconds, 1e-9))
		}
		m, err := Build(context.Background(), BuildOptions{
			Corpus: c.String("corpus"), Out: c.String("out"),
			Analyzer:   Analyzer{Stopwords: c.Bool("stopwords"), Stem: c.Bool("stem")},
			BM25:       BM25Params{K1: c.Float64("k1"), B: c.Float64("b")},
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
			&ucli.StringFlag{Name: "from", Usage: "input layout: " + strings.Join(Sources, "|")},
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
				return fmt.Errorf("corpus: --from is required (%s)", strings.Join(Sources, "|"))
			}
			if f, err := fileio.Format(outPath); err != nil || f != "jsonl" {
				return fmt.Errorf("corpus: --out %s: want a .jsonl file or -", outPath)
			}
			out, err := fileio.Create(outPath)
			if err != nil {
				return err
			}
			defer out.Abort()
			st, err := ConvertCorpus(from, files, out)
			if err != nil {
				return err
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

// ServeApp is the mempo-serve command.
func ServeApp() *ucli.App {
	app := cli.App("mempo-serve", "serve an index over HTTP (Search-R1 /retrieve contract)",
		"mempo-serve --index index/ --addr 127.0.0.1:8000\n"+
			"mempo-serve --index index/ --encoder e5-base-v2/   (dense search of text queries)\n"+
			"curl -s localhost:8000/retrieve -d '{\"queries\":[\"who wrote hamlet\"],\"topk\":3,\"return_scores\":true}'")
	app.Flags = []ucli.Flag{
		&ucli.StringFlag{Name: "index", Usage: "index `DIR` built by mempo-index"},
		&ucli.StringFlag{Name: "addr", Value: "127.0.0.1:8000", Usage: "listen address"},
		&ucli.IntFlag{Name: "topk", Value: 3, Usage: "results per query when a request's topk is null or 0"},
		&ucli.IntFlag{Name: "max-topk", Value: 1000, Usage: "largest topk a request may ask for"},
		&ucli.StringFlag{Name: "method", Value: string(MethodBM25), Usage: "default method: bm25 or dense"},
		&ucli.IntFlag{Name: "queue", Value: 1024, Usage: "requests that may wait; beyond, 503 with Retry-After"},
		&ucli.IntFlag{Name: "workers", Value: 0, Usage: "search workers (0: one per CPU)"},
		&ucli.IntFlag{Name: "max-batch", Value: 256, Usage: "queries per internal batch"},
		&ucli.IntFlag{Name: "max-queries", Value: 4096, Usage: "queries per request"},
		&ucli.Int64Flag{Name: "max-body", Value: 8 << 20, Usage: "request body limit in bytes (413 beyond)"},
		&ucli.StringSliceFlag{Name: "faiss-param", Usage: "FAISS search parameter `NAME=VALUE` (efSearch=128, nprobe=32), repeatable"},
		&ucli.DurationFlag{Name: "grace", Value: 30 * time.Second, Usage: "how long SIGTERM waits for requests in progress"},
	}
	app.Flags = append(app.Flags, encoderFlags()...)
	app.Flags = append(app.Flags, &ucli.StringFlag{Name: "gpu-search", Usage: "search dense queries on the GPU (fp16 vectors, GEMM + top-k) over the index's vectors in this .npy `FILE` (INDEX.embeddings.npy after mempo-index --encoder)"})
	app.Action = func(c *ucli.Context) error {
		if c.String("index") == "" {
			return fmt.Errorf("--index is required")
		}
		m := Method(c.String("method"))
		enc, err := loadEncoder(c)
		if err != nil {
			return err
		}
		if enc != nil && !c.IsSet("method") {
			m = MethodDense // an encoder is given for dense search
		}
		if m != MethodBM25 && m != MethodDense {
			return fmt.Errorf("--method %q: want bm25 or dense", m)
		}
		start := time.Now()
		ix, err := Open(c.String("index"))
		if err != nil {
			return err
		}
		defer ix.Close()
		for _, p := range c.StringSlice("faiss-param") {
			name, val, ok := strings.Cut(p, "=")
			v, err := strconv.ParseFloat(val, 64)
			if !ok || err != nil {
				return fmt.Errorf("--faiss-param %q: want NAME=NUMBER", p)
			}
			if ix.Dense == nil {
				return fmt.Errorf("--faiss-param %q: the index has no dense part", p)
			}
			if err := ix.Dense.SetParam(name, v); err != nil {
				return fmt.Errorf("--faiss-param %q: %w", p, err)
			}
		}
		if m == MethodDense && ix.Dense == nil {
			return fmt.Errorf("--method dense: %s has no dense index", c.String("index"))
		}
		if p := c.String("gpu-search"); p != "" {
			if ix.Dense == nil {
				return fmt.Errorf("--gpu-search: %s has no dense index", c.String("index"))
			}
			if c.Int("max-topk") > cuda.MaxFlatK {
				return fmt.Errorf("--gpu-search: --max-topk %d is over the GPU search's %d", c.Int("max-topk"), cuda.MaxFlatK)
			}
			if ix.VectorSearch, err = LoadGPUFlat(p, ix.Manifest.Docs, ix.Dense.D()); err != nil {
				return fmt.Errorf("--gpu-search: %w", err)
			}
		}
		cfg := ServerConfig{DefaultTopK: c.Int("topk"), MaxTopK: c.Int("max-topk"), Method: m, QueueSize: c.Int("queue"),
			Workers: c.Int("workers"), MaxBatch: c.Int("max-batch"), MaxQueries: c.Int("max-queries"), MaxBodyBytes: c.Int64("max-body")}
		if enc != nil {
			if ix.Dense == nil {
				return fmt.Errorf("--encoder: %s has no dense index", c.String("index"))
			}
			if ix.Dense.D() != enc.Dim() {
				return fmt.Errorf("--encoder %s embeds in %d dimensions, the dense index of %s has %d", c.String("encoder"), enc.Dim(), c.String("index"), ix.Dense.D())
			}
			cfg.Encoder = enc.Queries()
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		logger := log.New(os.Stderr, "mempo-serve: ", 0)
		if enc != nil {
			logger.Print(describeEncoder(enc, c.String("encoder")))
		}
		err = ListenAndServe(ctx, c.String("addr"), ix, cfg, c.Duration("grace"), logger, func(a net.Addr) {
			dense := "no dense index"
			if ix.Dense != nil {
				dense = fmt.Sprintf("dense %d×%d", ix.Dense.Ntotal(), ix.Dense.D())
			}
			logger.Printf("serving %d passages (%s) on http://%s (ready in %.2fs)", ix.Manifest.Docs, dense, a, time.Since(start).Seconds())
		})
		if err != nil {
			return err
		}
		logger.Printf("stopped")
		return nil
	}
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
