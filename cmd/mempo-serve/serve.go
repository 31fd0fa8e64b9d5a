package main

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

	"github.com/mempo/mempo/cmd/internal/flags"
	"github.com/mempo/mempo/lib/cli"
	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/retrieval"
)

// serveApp is the mempo-serve command.
func serveApp() *ucli.App {
	app := cli.App("mempo-serve", "serve an index over HTTP (Search-R1 /retrieve contract)",
		"mempo-serve --index index/ --addr 127.0.0.1:8000\n"+
			"mempo-serve --index index/ --encoder e5-base-v2/   (dense search of text queries)\n"+
			"curl -s localhost:8000/retrieve -d '{\"queries\":[\"who wrote hamlet\"],\"topk\":3,\"return_scores\":true}'")
	app.Flags = []ucli.Flag{
		&ucli.StringFlag{Name: "index", Usage: "index `DIR` built by mempo-index"},
		&ucli.StringFlag{Name: "addr", Value: "127.0.0.1:8000", Usage: "listen address"},
		&ucli.IntFlag{Name: "topk", Value: 3, Usage: "results per query when a request's topk is null or 0"},
		&ucli.IntFlag{Name: "max-topk", Value: 1000, Usage: "largest topk a request may ask for"},
		&ucli.StringFlag{Name: "method", Value: string(retrieval.MethodBM25), Usage: "default method: bm25 or dense"},
		&ucli.IntFlag{Name: "queue", Value: 1024, Usage: "requests that may wait; beyond, 503 with Retry-After"},
		&ucli.IntFlag{Name: "workers", Value: 0, Usage: "search workers (0: one per CPU)"},
		&ucli.IntFlag{Name: "max-batch", Value: 256, Usage: "queries per internal batch"},
		&ucli.IntFlag{Name: "max-queries", Value: 4096, Usage: "queries per request"},
		&ucli.Int64Flag{Name: "max-body", Value: 8 << 20, Usage: "request body limit in bytes (413 beyond)"},
		&ucli.StringSliceFlag{Name: "faiss-param", Usage: "FAISS search parameter `NAME=VALUE` (efSearch=128, nprobe=32), repeatable"},
		&ucli.DurationFlag{Name: "grace", Value: 30 * time.Second, Usage: "how long SIGTERM waits for requests in progress"},
		&ucli.DurationFlag{Name: "read-timeout", Value: 30 * time.Second, Usage: "longest time a client may take to send a request, headers and body (408 beyond)"},
		&ucli.DurationFlag{Name: "write-timeout", Value: 60 * time.Second, Usage: "longest time from the end of a request's headers to the end of its answer"},
		&ucli.IntFlag{Name: "max-conns", Value: 1024, Usage: "open connections served at once; more clients wait in the listen backlog"},
		&ucli.BoolFlag{Name: "verify", Usage: "check the checksum of every index file at start, the docstore and FAISS file included (slow on a large index)"},
	}
	app.Flags = append(app.Flags, flags.EncoderFlags()...)
	app.Flags = append(app.Flags, &ucli.StringFlag{Name: "gpu-search", Usage: "search dense queries on the GPU (fp16 vectors, GEMM + top-k) over the index's vectors in this .npy `FILE` (INDEX.embeddings.npy after mempo-index --encoder)"})
	app.Action = func(c *ucli.Context) error {
		if err := cli.Require(c, "index"); err != nil {
			return err
		}
		m := retrieval.Method(c.String("method"))
		enc, err := flags.LoadEncoder(c)
		if err != nil {
			return err
		}
		if enc != nil && !c.IsSet("method") {
			m = retrieval.MethodDense // an encoder is given for dense search
		}
		if m != retrieval.MethodBM25 && m != retrieval.MethodDense {
			return fmt.Errorf("--method %q: want bm25 or dense", m)
		}
		start := time.Now()
		ix, err := retrieval.Open(c.String("index"))
		if err != nil {
			return err
		}
		defer ix.Close()
		if c.Bool("verify") {
			if err := ix.Verify(); err != nil {
				return err
			}
		}
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
		if m == retrieval.MethodDense && ix.Dense == nil {
			return fmt.Errorf("--method dense: %s has no dense index", c.String("index"))
		}
		if p := c.String("gpu-search"); p != "" {
			if ix.Dense == nil {
				return fmt.Errorf("--gpu-search: %s has no dense index", c.String("index"))
			}
			if c.Int("max-topk") > cuda.MaxFlatK {
				return fmt.Errorf("--gpu-search: --max-topk %d is over the GPU search's %d", c.Int("max-topk"), cuda.MaxFlatK)
			}
			if ix.VectorSearch, err = retrieval.LoadGPUFlat(p, ix.Manifest.Docs, ix.Dense.D()); err != nil {
				return fmt.Errorf("--gpu-search: %w", err)
			}
		}
		cfg := retrieval.ServerConfig{DefaultTopK: c.Int("topk"), MaxTopK: c.Int("max-topk"), Method: m, QueueSize: c.Int("queue"),
			Workers: c.Int("workers"), MaxBatch: c.Int("max-batch"), MaxQueries: c.Int("max-queries"), MaxBodyBytes: c.Int64("max-body"),
			ReadTimeout: c.Duration("read-timeout"), WriteTimeout: c.Duration("write-timeout"), MaxConns: c.Int("max-conns")}
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
			logger.Print(flags.DescribeEncoder(enc, c.String("encoder")))
		}
		err = retrieval.ListenAndServe(ctx, c.String("addr"), ix, cfg, c.Duration("grace"), logger, func(a net.Addr) {
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
