// Command mempo-serve serves an index directory over the Search-R1 /retrieve
// HTTP contract.
package main

import "github.com/mempo/mempo/lib/cli"

func main() {
	app := cli.App("mempo-serve", "serve an index over HTTP (Search-R1 /retrieve contract)",
		"mempo-serve --index index/ --addr 127.0.0.1:8000")
	app.Action = cli.NotBuiltYet("mempo-serve will answer POST /retrieve from an index directory")
	cli.Main(app)
}
