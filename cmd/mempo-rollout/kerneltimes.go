package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// kernelTimesTop is how many kernels of each phase the table lists.
const kernelTimesTop = 12

// kernelTimes formats the policy's kernel times (MEMPO_CUDA_KERNEL_TIMES):
// each phase's total, then its largest kernels with their share of the
// phase and their launches. Names are "phase kernel" (model.StopKernelTimes).
func kernelTimes(ms map[string]float64, calls map[string]int) string {
	type row struct {
		kernel string
		ms     float64
		calls  int
	}
	phases := map[string][]row{}
	total := map[string]float64{}
	for name, t := range ms {
		phase, kernel, ok := strings.Cut(name, " ")
		if !ok {
			phase, kernel = "other", name
		}
		phases[phase] = append(phases[phase], row{kernel, t, calls[name]})
		total[phase] += t
	}
	order := make([]string, 0, len(phases))
	for p := range phases {
		order = append(order, p)
	}
	slices.SortFunc(order, func(a, b string) int { return cmp.Compare(total[b], total[a]) })
	var sb strings.Builder
	sb.WriteString("kernel times (CUDA events, ms):\n")
	for _, p := range order {
		rows := phases[p]
		slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(b.ms, a.ms) })
		launches := 0
		for _, r := range rows {
			launches += r.calls
		}
		fmt.Fprintf(&sb, "  %-8s %10.1f ms in %d launches\n", p, total[p], launches)
		for i, r := range rows {
			if i == kernelTimesTop {
				fmt.Fprintf(&sb, "    … %d more kernels\n", len(rows)-i)
				break
			}
			fmt.Fprintf(&sb, "    %-28s %10.1f ms %5.1f%% %9d launches\n", r.kernel, r.ms, 100*r.ms/max(total[p], 1e-9), r.calls)
		}
	}
	return sb.String()
}
