package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/dist"
	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/model"
)

// Data-parallel updates: `--nproc N` starts N ranks of this very command on
// this machine; under torchrun or srun the environment names the rank
// (dist.ReadEnv). Each rank computes its shard of every mini-batch, the
// gradients are summed across ranks and the AdamW state is split by tensor
// (lib/update/dp.go).

var nprocFlag = &ucli.IntFlag{Name: "nproc", Value: 1, Usage: "start this many local ranks of a data-parallel update (one per GPU); under torchrun/srun the environment's RANK and WORLD_SIZE are used instead"}

// joinRun reads the rendezvous; more than one rank joins the others. It
// returns nil for a one-process run.
func joinRun(c *ucli.Context) (dist.Comm, error) {
	e, err := dist.ReadEnv()
	if err != nil {
		return nil, err
	}
	if e.Size == 1 {
		return nil, nil
	}
	if c.IsSet("nproc") && c.Int("nproc") != e.Size {
		return nil, fmt.Errorf("--nproc %d, but WORLD_SIZE=%d: give one of the two", c.Int("nproc"), e.Size)
	}
	if c.Int("grad-shards") != 1 {
		return nil, fmt.Errorf("--grad-shards: a run of %d ranks already shards every mini-batch %d ways; drop --grad-shards", e.Size, e.Size)
	}
	// One GPU per local rank, and NVLink multicast (NVLS) off in NCCL.
	if envconfig.CUDADevice.Get() == "" {
		os.Setenv(envconfig.CUDADevice.Name, strconv.Itoa(e.LocalRank))
	}
	os.Setenv("NCCL_NVLS_ENABLE", "0")
	return dist.Join(e)
}

// launch starts n ranks of this command (the same arguments) on this
// machine and waits for them; when one fails the others are stopped.
func launch(c *ucli.Context, n int) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("--nproc: no free local port: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmds := make([]*exec.Cmd, n)
	for r := range cmds {
		cmd := exec.Command(exe, os.Args[1:]...)
		cmd.Env = append(os.Environ(), "RANK="+strconv.Itoa(r), "LOCAL_RANK="+strconv.Itoa(r),
			"WORLD_SIZE="+strconv.Itoa(n), "LOCAL_WORLD_SIZE="+strconv.Itoa(n),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port), "NCCL_NVLS_ENABLE=0")
		cmd.Stdout, cmd.Stderr = io.Discard, c.App.ErrWriter
		if r == 0 {
			cmd.Stdout = c.App.Writer
		}
		cmds[r] = cmd
	}
	type exit struct {
		rank int
		err  error
	}
	done := make(chan exit, n)
	for r, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			for _, p := range cmds[:r] {
				p.Process.Kill()
			}
			return fmt.Errorf("--nproc: starting rank %d: %v", r, err)
		}
		go func(r int, cmd *exec.Cmd) { done <- exit{r, cmd.Wait()} }(r, cmd)
	}
	var first *exit
	for i := 0; i < n; i++ {
		e := <-done
		if e.err != nil && first == nil {
			first = &e
			// The others would wait for the failed rank at the next
			// collective: stop them now.
			for r, cmd := range cmds {
				if r != e.rank {
					cmd.Process.Kill()
				}
			}
		}
	}
	if first != nil {
		var ee *exec.ExitError
		if errors.As(first.err, &ee) && ee.Exited() {
			return fmt.Errorf("rank %d of %d failed (exit status %d); the other ranks were stopped", first.rank, n, ee.ExitCode())
		}
		return fmt.Errorf("rank %d of %d failed (%v); the other ranks were stopped", first.rank, n, first.err)
	}
	return nil
}

// collectives is the comm a data-parallel step uses: NCCL on the device
// when the model is on a GPU (the control comm then only carries the small
// exchanges), else the control comm itself.
func collectives(ctl dist.Comm, m *model.Model) (dist.Comm, func(), error) {
	cu, ok := m.Backend().(*model.CUDA)
	if !ok {
		return ctl, func() {}, nil
	}
	nc, err := cuda.JoinNCCL(cu.Device(), ctl)
	if err != nil {
		return nil, nil, fmt.Errorf("NCCL: %w", err)
	}
	return nc, func() { nc.Close() }, nil
}
