package dist

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/mempo/mempo/lib/envconfig"
)

// join starts n ranks in this process through a rendezvous file and runs f
// on each; it returns the ranks' errors.
func join(t *testing.T, n int, f func(c Comm) error) []error {
	t.Helper()
	file := filepath.Join(t.TempDir(), "addr")
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			c, err := Join(Env{Rank: r, Size: n, File: file})
			if err != nil {
				errs[r] = err
				return
			}
			defer c.Close()
			errs[r] = f(c)
		}(r)
	}
	wg.Wait()
	return errs
}

func values(rank, n int) []float32 {
	r := rand.New(rand.NewPCG(uint64(rank), 7))
	v := make([]float32, n)
	for i := range v {
		// Magnitudes far apart, so a different summation order would show.
		v[i] = float32(r.NormFloat64() * float64(int(1)<<(r.IntN(20))))
	}
	return v
}

// The sum must be bit-identical to adding rank 0's values, then rank 1's, …
// in float32: the order of the one-process loop over shards.
func TestCollectivesRankOrder(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			const L = 1000
			want := append([]float32(nil), values(0, n*L)...)
			for r := 1; r < n; r++ {
				for i, x := range values(r, n*L) {
					want[i] += x
				}
			}
			errs := join(t, n, func(c Comm) error {
				buf := values(c.Rank(), n*L)
				if err := c.AllReduce(buf); err != nil {
					return err
				}
				if !reflect.DeepEqual(buf, want) {
					return fmt.Errorf("rank %d: all-reduce differs from the rank-order sum", c.Rank())
				}
				out := make([]float32, L)
				if err := c.ReduceScatter(values(c.Rank(), n*L), out); err != nil {
					return err
				}
				if !reflect.DeepEqual(out, want[c.Rank()*L:(c.Rank()+1)*L]) {
					return fmt.Errorf("rank %d: reduce-scatter slice differs", c.Rank())
				}
				all := make([]float32, n*3)
				if err := c.AllGather([]float32{float32(c.Rank()), 1, 2}, all); err != nil {
					return err
				}
				for r := 0; r < n; r++ {
					if all[3*r] != float32(r) || all[3*r+2] != 2 {
						return fmt.Errorf("rank %d: all-gather %v", c.Rank(), all)
					}
				}
				b := []float32{float32(c.Rank()), 0}
				if err := c.Broadcast(b, n-1); err != nil {
					return err
				}
				if b[0] != float32(n-1) {
					return fmt.Errorf("rank %d: broadcast got %v", c.Rank(), b)
				}
				parts, err := c.Exchange([]byte(strings.Repeat("x", c.Rank())))
				if err != nil {
					return err
				}
				for r, p := range parts {
					if len(p) != r {
						return fmt.Errorf("rank %d: exchange part %d has %d bytes", c.Rank(), r, len(p))
					}
				}
				return c.Barrier()
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// A rank that calls another collective, or leaves, stops the others with
// an error rather than a hang or garbage.
func TestCollectiveMismatch(t *testing.T) {
	errs := join(t, 2, func(c Comm) error {
		if c.Rank() == 1 {
			return c.Barrier()
		}
		return c.AllReduce([]float32{1})
	})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "out of step") {
		t.Errorf("rank 0: %v, want an out-of-step error", errs[0])
	}
	errs = join(t, 3, func(c Comm) error {
		if c.Rank() == 2 {
			return nil // leaves at once
		}
		return c.AllReduce([]float32{1})
	})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "rank 2 left the run") {
		t.Errorf("rank 0: %v, want rank 2 left the run", errs[0])
	}
	if errs[1] == nil {
		t.Errorf("rank 1 finished an all-reduce rank 2 never joined")
	}
}

func TestReadEnv(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string // error substring, or "" for success
		addr string
	}{
		{map[string]string{}, "", ""},
		{map[string]string{"WORLD_SIZE": "x"}, `WORLD_SIZE="x"`, ""},
		{map[string]string{"WORLD_SIZE": "2", "RANK": "2"}, `RANK="2"`, ""},
		{map[string]string{"WORLD_SIZE": "2", "RANK": "1"}, "needs MASTER_ADDR", ""},
		{map[string]string{"RANK": "0"}, "WORLD_SIZE is not", ""},
		{map[string]string{"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "29500"}, "", "h:29500"},
		{map[string]string{"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "29500", "TORCHELASTIC_USE_AGENT_STORE": "True"}, "", "h:29501"},
	} {
		for _, k := range []string{"WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE", envconfig.DistFile.Name} {
			t.Setenv(k, c.env[k])
		}
		e, err := ReadEnv()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.env, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: error %v, want %q", c.env, err, c.want)
		case err == nil && e.Addr != c.addr:
			t.Errorf("%v: address %q, want %q", c.env, e.Addr, c.addr)
		}
	}
}
