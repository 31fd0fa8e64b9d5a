package report

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/records"
)

// Plot size: 6×4 inches at gonum's PNG default of 96 dpi, i.e. 576×384 pixels.
const (
	PlotWidth  = 6 * vg.Inch
	PlotHeight = 4 * vg.Inch
	PlotDPI    = 96
)

// series is one line of a plot.
type series struct {
	name string
	xy   plotter.XYs
}

// RunUpdates are the update metrics of one run.
type RunUpdates struct {
	Run     string
	Updates []records.Update
}

// UpdatePlots writes reward.png (mean R^T), memory_reward.png (mean R^M) and
// peak_tokens_updates.png (mean peak tokens) against the update step, one line
// per run, into dir, and returns the paths written. NaN values are left out.
func UpdatePlots(dir string, runs []RunUpdates) ([]string, error) {
	specs := []struct {
		file, title, ylabel string
		get                 func(*records.Update) float64
	}{
		{"reward.png", "Task reward over updates", "mean R^T", func(u *records.Update) float64 { return u.RewardTaskMean }},
		{"memory_reward.png", "Memory reward over updates", "mean R^M", func(u *records.Update) float64 { return orNaN(u.RewardMemMean) }},
		{"peak_tokens_updates.png", "Peak tokens over updates", "mean peak tokens per trajectory", func(u *records.Update) float64 { return u.PeakTokensMean }},
	}
	var written []string
	for _, sp := range specs {
		var ss []series
		for _, r := range runs {
			var xy plotter.XYs
			for i := range r.Updates {
				if y := sp.get(&r.Updates[i]); !math.IsNaN(y) && !math.IsInf(y, 0) {
					xy = append(xy, plotter.XY{X: float64(r.Updates[i].Step), Y: y})
				}
			}
			slices.SortFunc(xy, func(a, b plotter.XY) int { return cmpFloat(a.X, b.X) })
			ss = append(ss, series{r.Run, xy})
		}
		path := filepath.Join(dir, sp.file)
		ok, err := linePlot(path, sp.title, "update step", sp.ylabel, ss)
		if err != nil {
			return written, err
		}
		if ok {
			written = append(written, path)
		}
	}
	return written, nil
}

// KPlots writes f1_vs_k.png and peak_tokens_vs_k.png: the metric against the
// number of objectives, one line per run (per run and data source when a run
// covers several), into dir, and returns the paths written.
func KPlots(dir string, scores []records.Score, runs []string) ([]string, error) {
	type key struct{ run, src string }
	var written []string
	for _, sp := range []struct{ file, metric, title, ylabel string }{
		{"f1_vs_k.png", MetricF1, "F1 against the number of objectives", "F1"},
		{"peak_tokens_vs_k.png", MetricPeakTokens, "Peak tokens against the number of objectives", "mean peak tokens"},
	} {
		var order []key
		pts := map[key]plotter.XYs{}
		sources := map[string][]string{}
		for _, s := range scores {
			if s.Metric != sp.metric || math.IsNaN(s.Value) {
				continue
			}
			k := key{s.Run, s.DataSource}
			if _, seen := pts[k]; !seen {
				order = append(order, k)
			}
			pts[k] = append(pts[k], plotter.XY{X: float64(s.K), Y: s.Value})
			if !slices.Contains(sources[s.Run], s.DataSource) {
				sources[s.Run] = append(sources[s.Run], s.DataSource)
			}
		}
		slices.SortStableFunc(order, func(a, b key) int {
			return cmpInt(slices.Index(runs, a.run), slices.Index(runs, b.run))
		})
		var ss []series
		for _, k := range order {
			xy := pts[k]
			slices.SortFunc(xy, func(a, b plotter.XY) int { return cmpFloat(a.X, b.X) })
			name := k.run
			if len(sources[k.run]) > 1 {
				name = fmt.Sprintf("%s (%s)", k.run, displaySource(k.src))
			}
			ss = append(ss, series{name, xy})
		}
		path := filepath.Join(dir, sp.file)
		ok, err := linePlot(path, sp.title, "objectives k", sp.ylabel, ss)
		if err != nil {
			return written, err
		}
		if ok {
			written = append(written, path)
		}
	}
	return written, nil
}

// linePlot draws lines with point marks and writes a PNG atomically; it
// writes nothing and returns false when no series has a point.
func linePlot(path, title, xlabel, ylabel string, ss []series) (bool, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	n := 0
	for i, s := range ss {
		if len(s.xy) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(s.xy)
		if err != nil {
			return false, fmt.Errorf("%s: %s: %w", path, s.name, err)
		}
		l.Color = plotutil.Color(i)
		sc.Color = plotutil.Color(i)
		sc.Shape = plotutil.Shape(i)
		p.Add(l, sc)
		p.Legend.Add(s.name, l, sc)
		n++
	}
	if n == 0 {
		return false, nil
	}
	pad(&p.X.Min, &p.X.Max)
	pad(&p.Y.Min, &p.Y.Max)
	wt, err := p.WriterTo(PlotWidth, PlotHeight, "png")
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return true, fileio.WriteFileAtomic(path, buf.Bytes())
}

// orNaN is a nullable metric as a float: NaN (not drawn) when the run did
// not compute it.
func orNaN(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpInt(a, b int) int { return cmpFloat(float64(a), float64(b)) }

// pad widens an axis range by 5% on each side (±1 when it is a single value)
// so points on the edge stay clear of the frame.
func pad(lo, hi *float64) {
	d := 0.05 * (*hi - *lo)
	if d == 0 {
		d = 1
	}
	*lo -= d
	*hi += d
}
