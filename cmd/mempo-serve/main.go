// Command mempo-serve serves an index directory over the Search-R1 /retrieve
// HTTP contract.
package main

import "github.com/mempo/mempo/lib/cli"

func main() { cli.Main(serveApp()) }
