package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/mempo/mempo/lib/records"
)

// tableColumns are the per-k columns of the main table, as in the paper's
// Table 1: EM, F1, total tokens (TT) and peak tokens (PT).
var tableColumns = []struct{ metric, head string }{
	{MetricEM, "EM"}, {MetricF1, "F1"}, {MetricTotalTokens, "TT"}, {MetricPeakTokens, "PT"},
}

// Markdown renders scores as markdown: for each data source, one table with
// the runs as rows and, for each objective count k, EM, F1, TT and PT side by
// side (the layout of the paper's Table 1); then every metric in long form
// with its 95% interval and n. runs gives the row order (others follow in
// the order they appear).
func Markdown(scores []records.Score, runs []string) string {
	runs = slices.Clone(runs)
	type cell struct {
		run, src string
		k        int32
		metric   string
	}
	val := map[cell]records.Score{}
	var sources []string
	ks := map[string][]int32{}
	for _, s := range scores {
		if !slices.Contains(runs, s.Run) {
			runs = append(runs, s.Run)
		}
		if !slices.Contains(sources, s.DataSource) {
			sources = append(sources, s.DataSource)
		}
		if !slices.Contains(ks[s.DataSource], s.K) {
			ks[s.DataSource] = append(ks[s.DataSource], s.K)
		}
		val[cell{s.Run, s.DataSource, s.K, s.Metric}] = s
	}
	slices.Sort(sources)
	var b strings.Builder
	for _, src := range sources {
		slices.Sort(ks[src])
		fmt.Fprintf(&b, "### %s\n\n| run |", displaySource(src))
		for _, k := range ks[src] {
			for _, c := range tableColumns {
				fmt.Fprintf(&b, " k=%d %s |", k, c.head)
			}
		}
		b.WriteString("\n|---|")
		for range ks[src] {
			for range tableColumns {
				b.WriteString("---:|")
			}
		}
		b.WriteString("\n")
		for _, run := range runs {
			any := false
			var row strings.Builder
			fmt.Fprintf(&row, "| %s |", escape(run))
			for _, k := range ks[src] {
				for _, c := range tableColumns {
					s, ok := val[cell{run, src, k, c.metric}]
					if ok {
						any = true
						fmt.Fprintf(&row, " %s |", formatValue(c.metric, s.Value))
					} else {
						row.WriteString(" — |")
					}
				}
			}
			if any {
				b.WriteString(row.String())
				b.WriteString("\n")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("### All metrics (95% bootstrap interval)\n\n| run | data source | k | metric | value | 95% CI | n |\n|---|---|---:|---|---:|---|---:|\n")
	sorted := slices.Clone(scores)
	slices.SortStableFunc(sorted, func(x, y records.Score) int {
		return cmp.Or(cmp.Compare(slices.Index(runs, x.Run), slices.Index(runs, y.Run)),
			cmp.Compare(x.DataSource, y.DataSource), cmp.Compare(x.K, y.K),
			cmp.Compare(metricIndex(x.Metric), metricIndex(y.Metric)))
	})
	for _, s := range sorted {
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | [%s, %s] | %d |\n", escape(s.Run), escape(displaySource(s.DataSource)), s.K, s.Metric,
			formatValue(s.Metric, s.Value), formatValue(s.Metric, s.CILow), formatValue(s.Metric, s.CIHigh), s.N)
	}
	return b.String()
}

func metricIndex(m string) int {
	if i := slices.Index(Metrics, m); i >= 0 {
		return i
	}
	return len(Metrics)
}

func displaySource(s string) string {
	if s == "" {
		return "(no data source)"
	}
	return s
}

func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// formatValue prints percentages and averages with two decimals, token
// counts with none, probabilities with four.
func formatValue(metric string, v float64) string {
	if math.IsNaN(v) {
		return "NaN"
	}
	switch metric {
	case MetricTotalTokens, MetricPeakTokens:
		return fmt.Sprintf("%.0f", v)
	case MetricPGoldMem, MetricRMem, MetricRewardTask:
		return fmt.Sprintf("%.4f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
