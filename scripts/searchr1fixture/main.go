// Command searchr1fixture writes QA questions in the row layout of
// Search-R1's own data script (scripts/data_process/qa_search_train_merge.py:
// data_source, a one-message chat prompt made by make_prefix, ability,
// reward_model.ground_truth.target, extra_info {split, index}), without the
// FlashRAG columns, so the question is only inside the prompt. It made
// testdata/tasks/searchr1-train.parquet:
//
//	go run ./scripts/searchr1fixture --n 24 --skip 500 --out testdata/tasks/searchr1-train.parquet \
//	    ../shared/data/nq/test-1000.jsonl ../shared/data/hotpotqa/train-with-paragraphs.jsonl
//
// (--skip 500 leaves NQ's first 500 questions to evaluation.)
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/parquet-go/parquet-go"
	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/cli"
	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/tasks"
)

// makePrefix is Search-R1's make_prefix, template_type "base", verbatim.
func makePrefix(q string) string {
	return "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get new information. " +
		"After reasoning, if you find you lack some knowledge, you can call a search engine by <search> query </search> and it will return the top searched results between <information> and </information>. " +
		"You can search as many times as your want. If you find no further external knowledge needed, you can directly provide the answer inside <answer> and </answer>, without detailed illustrations. " +
		"For example, <answer> Beijing </answer>. Question: " + q + "\n"
}

type message struct {
	Content string `parquet:"content"`
	Role    string `parquet:"role"`
}

type row struct {
	DataSource  string    `parquet:"data_source"`
	Prompt      []message `parquet:"prompt,list"`
	Ability     string    `parquet:"ability"`
	RewardModel struct {
		GroundTruth struct {
			Target []string `parquet:"target,list"`
		} `parquet:"ground_truth"`
		Style string `parquet:"style"`
	} `parquet:"reward_model"`
	ExtraInfo struct {
		Index int64  `parquet:"index"`
		Split string `parquet:"split"`
	} `parquet:"extra_info"`
}

func main() {
	app := cli.App("searchr1fixture", "write QA questions in Search-R1's prompt-only RL row layout (Parquet)",
		"go run ./scripts/searchr1fixture --n 24 --out train.parquet FILE...")
	app.Flags = []ucli.Flag{
		&ucli.IntFlag{Name: "n", Value: 24, Usage: "questions taken from each file"},
		&ucli.IntFlag{Name: "skip", Usage: "questions skipped at the start of the first file"},
		&ucli.StringFlag{Name: "split", Value: "train"},
		&ucli.StringFlag{Name: "out", Required: true},
	}
	app.Action = func(c *ucli.Context) error {
		var rows []row
		for fi, path := range c.Args().Slice() {
			qs, _, err := tasks.ReadFile(path, "auto", "")
			if err != nil {
				return err
			}
			if fi == 0 {
				qs = qs[min(c.Int("skip"), len(qs)):]
			}
			qs = qs[:min(c.Int("n"), len(qs))]
			for i, q := range qs {
				var r row
				// Search-R1 names sources by their FlashRAG config (nq, hotpotqa).
				r.DataSource = strings.SplitN(q.Source, "/", 2)[0]
				r.Prompt = []message{{Content: makePrefix(tasks.NormalizeQuestion(q.Question)), Role: "user"}}
				r.Ability = "fact-reasoning"
				r.RewardModel.GroundTruth.Target, r.RewardModel.Style = q.Golds, "rule"
				r.ExtraInfo.Index, r.ExtraInfo.Split = int64(i), c.String("split")
				rows = append(rows, r)
			}
		}
		f, err := fileio.Create(c.String("out"))
		if err != nil {
			return err
		}
		defer f.Abort()
		w := parquet.NewGenericWriter[row](f, parquet.Compression(&parquet.Zstd))
		if _, err := w.Write(rows); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "%d rows → %s\n", len(rows), c.String("out"))
		return f.Commit()
	}
	cli.Main(app)
}
