package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/records"
)

// Figure size: the plot area is 6×4 inches and the legend column beside it
// is as wide as its longest entry, at 96 dpi (a 6×4 plot is 576×384 pixels).
const (
	PlotWidth  = 6 * vg.Inch
	PlotHeight = 4 * vg.Inch
	PlotDPI    = 96
)

// point is one value with its 95% interval (lo, hi; NaN when there is none).
type point struct{ x, y, lo, hi float64 }

// series is one run's points.
type series struct {
	name string
	pts  []point
}

// figure is one PNG: a line per series over a numeric x axis, or, when no
// series has more than one point and they all share one x, one point per
// run over a categorical axis (a line through one point says nothing).
type figure struct {
	file                  string // base name of the PNG
	title, xlabel, ylabel string
	intX                  bool     // x is a count (k, step): integer ticks only
	notComputed           []string // runs that have none of this quantity: named in the legend, not drawn
	series                []series
}

// RunUpdates are the update metrics of one run.
type RunUpdates struct {
	Run     string
	Updates []records.Update
}

// UpdatePlots writes reward.png (mean R^T), memory_reward.png (mean R^M) and
// peak_tokens_updates.png (mean peak tokens) against the update step, one line
// per run, into dir, and returns the paths written. A run whose rows never
// hold the quantity (GRPO's memory reward) is named in the legend as not
// computed instead of being drawn as 0; NaN values are left out. The metrics
// rows hold means only, so these plots have no intervals.
func UpdatePlots(dir string, runs []RunUpdates) ([]string, error) {
	return writeFigures(dir, updateFigures(runs))
}

// writeFigures writes each figure that has points into dir and returns the
// paths written.
func writeFigures(dir string, figs []figure) ([]string, error) {
	var written []string
	for _, f := range figs {
		path := filepath.Join(dir, f.file)
		ok, err := f.write(path)
		if err != nil {
			return written, err
		}
		if ok {
			written = append(written, path)
		}
	}
	return written, nil
}

func updateFigures(runs []RunUpdates) []figure {
	specs := []struct {
		file, title, ylabel string
		get                 func(*records.Update) float64
	}{
		{"reward.png", "Task reward over updates", "mean R^T of the update's rollouts", func(u *records.Update) float64 { return u.RewardTaskMean }},
		{"memory_reward.png", "Memory reward over updates", "mean R^M of the update's rollouts", func(u *records.Update) float64 { return orNaN(u.RewardMemMean) }},
		{"peak_tokens_updates.png", "Peak tokens over updates", "mean peak tokens per trajectory", func(u *records.Update) float64 { return u.PeakTokensMean }},
	}
	var figs []figure
	for _, sp := range specs {
		f := figure{file: sp.file, title: sp.title, xlabel: "update step", ylabel: sp.ylabel, intX: true}
		for _, r := range runs {
			var pts []point
			for i := range r.Updates {
				if y := sp.get(&r.Updates[i]); !math.IsNaN(y) && !math.IsInf(y, 0) {
					pts = append(pts, point{x: float64(r.Updates[i].Step), y: y, lo: math.NaN(), hi: math.NaN()})
				}
			}
			if len(pts) == 0 {
				f.notComputed = append(f.notComputed, r.Run)
				continue
			}
			slices.SortFunc(pts, func(a, b point) int { return cmpFloat(a.x, b.x) })
			f.series = append(f.series, series{r.Run, pts})
		}
		figs = append(figs, f)
	}
	return figs
}

// KPlots writes f1_vs_k.png and peak_tokens_vs_k.png: the metric against the
// number of objectives with its 95% bootstrap interval, one line per run (per
// run and data source when a run covers several), into dir, and returns the
// paths written.
func KPlots(dir string, scores []records.Score, runs []string) ([]string, error) {
	type key struct{ run, src string }
	var figs []figure
	for _, sp := range []struct{ file, metric, title, ylabel string }{
		{"f1_vs_k.png", MetricF1, "F1 against the number of objectives", "F1 (95% bootstrap interval)"},
		{"peak_tokens_vs_k.png", MetricPeakTokens, "Peak tokens against the number of objectives", "mean peak tokens (95% interval)"},
	} {
		var order []key
		pts := map[key][]point{}
		sources := map[string][]string{}
		for _, s := range scores {
			if s.Metric != sp.metric || math.IsNaN(s.Value) {
				continue
			}
			k := key{s.Run, s.DataSource}
			if _, seen := pts[k]; !seen {
				order = append(order, k)
			}
			pts[k] = append(pts[k], point{x: float64(s.K), y: s.Value, lo: s.CILow, hi: s.CIHigh})
			if !slices.Contains(sources[s.Run], s.DataSource) {
				sources[s.Run] = append(sources[s.Run], s.DataSource)
			}
		}
		slices.SortStableFunc(order, func(a, b key) int {
			return cmpInt(slices.Index(runs, a.run), slices.Index(runs, b.run))
		})
		f := figure{file: sp.file, title: sp.title, xlabel: "objectives k", ylabel: sp.ylabel, intX: true}
		for _, k := range order {
			p := pts[k]
			slices.SortFunc(p, func(a, b point) int { return cmpFloat(a.x, b.x) })
			name := k.run
			if len(sources[k.run]) > 1 {
				name = fmt.Sprintf("%s (%s)", k.run, displaySource(k.src))
			}
			f.series = append(f.series, series{name, p})
		}
		figs = append(figs, f)
	}
	return writeFigures(dir, figs)
}

// palette is Okabe and Ito's colour-blind-safe set, with their yellow
// darkened (it is too pale on white); with the markers and dashes below,
// runs stay apart even in grey print.
var palette = []color.RGBA{
	{0, 114, 178, 255}, {213, 94, 0, 255}, {0, 158, 115, 255}, {204, 121, 167, 255},
	{230, 159, 0, 255}, {86, 180, 233, 255}, {0, 0, 0, 255}, {160, 140, 0, 255},
}

func seriesColor(i int) color.Color { return palette[i%len(palette)] }

func seriesShape(i int) draw.GlyphDrawer {
	shapes := []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PlusGlyph{},
		draw.CrossGlyph{}, draw.RingGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}}
	return shapes[i%len(shapes)]
}

func seriesDashes(i int) []vg.Length {
	d := [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}, {vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)}}
	return d[i%len(d)]
}

// categorical reports whether every series is one point at one shared x.
func (f *figure) categorical() bool {
	if len(f.series) == 0 {
		return false
	}
	x := f.series[0].pts[0].x
	for _, s := range f.series {
		if len(s.pts) != 1 || s.pts[0].x != x {
			return false
		}
	}
	return true
}

// write draws the figure and writes a PNG atomically; it writes nothing and
// returns false when no series has a point.
func (f *figure) write(path string) (bool, error) {
	if len(f.series) == 0 {
		return false, nil
	}
	p := plot.New()
	p.Title.Text = f.title
	p.X.Label.Text = f.xlabel
	p.Y.Label.Text = f.ylabel
	p.Add(plotter.NewGrid())
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	leg.ThumbnailWidth = vg.Points(36) // long enough to show a dash pattern whole
	leg.TextStyle.Font = font.From(plot.DefaultFont, 11)
	leg.Padding = vg.Points(3)

	cat := f.categorical()
	if cat {
		// One point per run: runs along x, each with its interval.
		p.Title.Text = fmt.Sprintf("%s (%s = %s)", f.title, shortLabel(f.xlabel), trimFloat(f.series[0].pts[0].x))
		p.X.Label.Text = "run"
		var labels []string
		for i, s := range f.series {
			pt := s.pts[0]
			pt.x = float64(i)
			if err := f.addSeries(p, &leg, i, series{s.name, []point{pt}}, false); err != nil {
				return false, fmt.Errorf("%s: %w", path, err)
			}
			labels = append(labels, s.name)
		}
		p.X.Tick.Marker = labelTicks(labels)
		p.X.Min, p.X.Max = -0.6, float64(len(labels))-0.4
		if len(labels) > 4 {
			p.X.Tick.Label.Rotation = math.Pi / 6
			p.X.Tick.Label.XAlign = draw.XRight
		}
	} else {
		// Equal runs would draw over each other: shift each run sideways by
		// a small fraction of the x spacing, so every one stays visible.
		dodge := f.dodge()
		for i, s := range f.series {
			shifted := series{name: s.name}
			for _, pt := range s.pts {
				pt.x += dodge * (float64(i) - float64(len(f.series)-1)/2)
				shifted.pts = append(shifted.pts, pt)
			}
			if err := f.addSeries(p, &leg, i, shifted, true); err != nil {
				return false, fmt.Errorf("%s: %w", path, err)
			}
		}
		if f.intX {
			p.X.Tick.Marker = intTicks{values: f.xValues()}
		}
		pad(&p.X.Min, &p.X.Max)
	}
	for _, name := range f.notComputed {
		leg.Add(name + ": not computed")
	}
	pad(&p.Y.Min, &p.Y.Max)

	// The legend gets its own column to the right of the plot area.
	legW := vg.Length(0)
	for _, s := range f.series {
		legW = max(legW, leg.TextStyle.Width(s.name))
	}
	for _, name := range f.notComputed {
		legW = max(legW, leg.TextStyle.Width(name+": not computed"))
	}
	legW += leg.ThumbnailWidth + leg.TextStyle.Width("  ") + vg.Points(8)
	if cat && len(f.notComputed) == 0 {
		legW = 0 // the runs are named on the axis
	}
	img := vgimg.NewWith(vgimg.UseWH(PlotWidth+legW, PlotHeight), vgimg.UseDPI(PlotDPI))
	dc := draw.New(img)
	p.Draw(draw.Crop(dc, 0, -legW, 0, 0))
	if legW > 0 {
		lc := draw.Crop(dc, PlotWidth+vg.Points(4), 0, 0, -vg.Points(24))
		leg.Draw(lc)
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return true, fileio.WriteFileAtomic(path, buf.Bytes())
}

// addSeries draws one series (line when asked and there are two points or
// more, markers, 95% error bars where known) and adds its legend entry.
func (f *figure) addSeries(p *plot.Plot, leg *plot.Legend, i int, s series, line bool) error {
	xys := make(plotter.XYs, len(s.pts))
	for k, pt := range s.pts {
		xys[k] = plotter.XY{X: pt.x, Y: pt.y}
	}
	col := seriesColor(i)
	var thumbs []plot.Thumbnailer
	if line && len(xys) > 1 {
		l, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		l.Color, l.Width, l.Dashes = col, vg.Points(1.5), seriesDashes(i)
		p.Add(l)
		thumbs = append(thumbs, l)
	}
	if len(xys) <= 60 { // markers on long curves are clutter
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		sc.Color, sc.Shape, sc.Radius = col, seriesShape(i), vg.Points(3.5)
		p.Add(sc)
		thumbs = append(thumbs, sc)
	}
	var eb errBars
	for _, pt := range s.pts {
		if !math.IsNaN(pt.lo) && !math.IsNaN(pt.hi) && pt.hi >= pt.lo {
			eb = append(eb, pt)
		}
	}
	if len(eb) > 0 {
		e, err := plotter.NewYErrorBars(eb)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		e.Color, e.Width, e.CapWidth = col, vg.Points(1.2), vg.Points(7)
		p.Add(e)
	}
	leg.Add(s.name, thumbs...)
	return nil
}

// errBars are points with their 95% interval, as plotter's YErrorer wants:
// the distances below and above the value.
type errBars []point

func (e errBars) Len() int                    { return len(e) }
func (e errBars) XY(i int) (float64, float64) { return e[i].x, e[i].y }
func (e errBars) YError(i int) (float64, float64) {
	return math.Max(e[i].y-e[i].lo, 0), math.Max(e[i].hi-e[i].y, 0)
}

// dodge is the sideways shift between runs: the group of runs at one x
// spans a quarter of the smallest x spacing, clear of the next x.
func (f *figure) dodge() float64 {
	if len(f.series) < 2 {
		return 0
	}
	xs := f.xValues()
	gap := math.Inf(1)
	for i := 1; i < len(xs); i++ {
		gap = math.Min(gap, xs[i]-xs[i-1])
	}
	if math.IsInf(gap, 1) || gap <= 0 {
		gap = 1
	}
	return 0.25 * gap / float64(len(f.series)-1)
}

// xValues are the distinct x values of all series, sorted.
func (f *figure) xValues() []float64 {
	var xs []float64
	for _, s := range f.series {
		for _, pt := range s.pts {
			xs = append(xs, pt.x)
		}
	}
	slices.Sort(xs)
	return slices.Compact(xs)
}

// intTicks labels a count axis with whole numbers only: every value when
// there are a few (k = 2, 4, 8), else a 1-2-5 step that gives about six.
type intTicks struct{ values []float64 }

func (t intTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	if len(t.values) > 0 && len(t.values) <= 10 {
		for _, v := range t.values {
			ticks = append(ticks, plot.Tick{Value: v, Label: trimFloat(v)})
		}
		return ticks
	}
	// The smallest 1-2-5 step (at least 1) that gives at most 7 ticks.
	step := math.Inf(1)
	for _, m := range []float64{1, 2, 5} {
		for e := 1.0; ; e *= 10 {
			if s := m * e; (hi-lo)/s <= 7 {
				step = math.Min(step, s)
				break
			}
		}
	}
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: trimFloat(v)})
	}
	return ticks
}

// labelTicks names categorical positions 0..n-1.
type labelTicks []string

func (l labelTicks) Ticks(_, _ float64) []plot.Tick {
	ticks := make([]plot.Tick, len(l))
	for i, s := range l {
		ticks[i] = plot.Tick{Value: float64(i), Label: s}
	}
	return ticks
}

func trimFloat(v float64) string {
	if v == 0 {
		v = 0 // no "-0"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// shortLabel is an axis label's first word ("objectives k" → "k").
func shortLabel(s string) string {
	if s == "objectives k" {
		return "k"
	}
	return s
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
