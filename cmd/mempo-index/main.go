// Command mempo-index builds a retrieval index directory from a passage corpus
// (see lib/retrieval for the directory layout).
package main

import "github.com/mempo/mempo/lib/cli"

func main() { cli.Main(indexApp()) }
