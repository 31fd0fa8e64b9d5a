package flags

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseShard reads a shard flag's value "i/n" (0 ≤ i < n): mempo-update
// grad --shard and mempo-rollout --shard.
func ParseShard(flag, s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("--%s %q: want i/n with 0 ≤ i < n", flag, s)
	}
	return i, n, nil
}
