// Command synthcorpus writes a large corpus for retrieval scale benchmarks by
// repeating and perturbing real passages (retrieval.SynthesizeCorpus):
//
//	go run ./scripts/synthcorpus --n 1000000 --out big.jsonl ../shared/data/wiki18/wiki18-first-1000.jsonl hotpot-corpus.jsonl
package main

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/cli"
	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/retrieval"
)

func main() {
	app := cli.App("synthcorpus", "repeat and perturb real passages into a large wiki-18-style corpus",
		"go run ./scripts/synthcorpus --n 1000000 --out big.jsonl corpus.jsonl...")
	app.Flags = []ucli.Flag{
		&ucli.IntFlag{Name: "n", Value: 1000000, Usage: "passages to write"},
		&ucli.StringFlag{Name: "out", Value: "-", Usage: "output .jsonl"},
		&ucli.Uint64Flag{Name: "seed", Value: 1},
	}
	app.Action = func(c *ucli.Context) error {
		var src []retrieval.Passage
		for _, f := range c.Args().Slice() {
			if err := retrieval.EachPassage(f, func(_ int, p retrieval.Passage) error {
				src = append(src, p)
				return nil
			}); err != nil {
				return err
			}
		}
		if len(src) == 0 {
			return fmt.Errorf("give source corpus files (wiki-18 layout)")
		}
		out, err := fileio.Create(c.String("out"))
		if err != nil {
			return err
		}
		defer out.Abort()
		if err := retrieval.SynthesizeCorpus(out, src, c.Int("n"), c.Uint64("seed")); err != nil {
			return err
		}
		return out.Commit()
	}
	cli.Main(app)
}
