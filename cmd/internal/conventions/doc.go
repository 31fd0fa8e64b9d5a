// Package conventions holds no code: its test builds the five commands and
// checks, over every command and subcommand, the conventions they share
// (one wording for a missing required flag, clean --help placeholders, no
// two flags described alike, flags accepted after file arguments).
package conventions
