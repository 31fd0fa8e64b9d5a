// Command mempo-index builds a retrieval index directory from a passage corpus.
package main

import "github.com/mempo/mempo/lib/cli"

func main() {
	app := cli.App("mempo-index", "build a retrieval index (docstore, BM25, optional FAISS) from a corpus",
		"mempo-index --corpus wiki18.jsonl --out index/")
	app.Action = cli.NotBuiltYet("mempo-index will build index/ from a corpus")
	cli.Main(app)
}
