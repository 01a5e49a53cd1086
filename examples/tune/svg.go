package main

import (
	"fmt"
	"math"
	"os"
	"strings"
)

// The plot: one point per setting, x = false deaths per member-hour (the
// budgeted rate), y = detection p99. Settings that meet the budget are
// filled, the others hollow; the recommended one has a ring; the budget is
// a dashed vertical line. Drawn with fmt and strings only.

const (
	svgW, svgH                        = 900, 560
	padLeft, padRight, padTop, padBot = 80, 170, 70, 70
	plotW, plotH                      = svgW - padLeft - padRight, svgH - padTop - padBot
	fontSize                          = 11
	charW                             = 6.3 // rough width of one character at fontSize, for label placement
)

// palette colours the points by IndirectChecks (cycled if there are more).
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;")

func esc(s string) string { return xmlEscaper.Replace(s) }

// axis maps data values onto pixels over a range rounded to nice ticks.
type axis struct {
	lo, hi, step float64
}

// niceAxis covers [lo, hi] with about five ticks at 1, 2 or 5 times a power
// of ten.
func niceAxis(lo, hi float64) axis {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / 5
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * p
	for _, m := range []float64{1, 2, 5} {
		if m*p >= raw {
			step = m * p
			break
		}
	}
	return axis{lo: math.Floor(lo/step+1e-9) * step, hi: math.Ceil(hi/step-1e-9) * step, step: step}
}

func (a axis) ticks() []float64 {
	var out []float64
	for i := 0; ; i++ {
		v := a.lo + float64(i)*a.step
		if v > a.hi+a.step/1e6 {
			return out
		}
		out = append(out, v)
	}
}

// frac is where v falls on the axis, 0 to 1.
func (a axis) frac(v float64) float64 { return (v - a.lo) / (a.hi - a.lo) }

// tickLabel prints a tick value without float noise (0.30000000000000004).
func tickLabel(v, step float64) string {
	decimals := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	return fmt.Sprintf("%.*f", decimals, v)
}

// box is a label's rectangle, for keeping labels apart.
type box struct{ x0, y0, x1, y1 float64 }

func (b box) overlaps(c box) bool { return b.x0 < c.x1 && c.x0 < b.x1 && b.y0 < c.y1 && c.y0 < b.y1 }

// renderSVG draws the plot.
func renderSVG(o *options, outs []outcome, best int) string {
	// x: up to the largest rate, the budget, and one false death in the
	// shortest measurement, so an all-zero plot still shows the scale.
	xmax := o.budget
	hours := math.Inf(1)
	for _, x := range outs {
		xmax = max(xmax, x.deathRate)
		hours = min(hours, x.memberHours)
	}
	if hours > 0 && !math.IsInf(hours, 1) {
		xmax = max(xmax, 1/hours)
	}
	if xmax <= 0 {
		xmax = 1
	}
	xa := niceAxis(0, xmax*1.05)

	// y: detection p99 in seconds; settings that detected nothing sit at
	// the top.
	ylo, yhi := math.Inf(1), math.Inf(-1)
	for _, x := range outs {
		if x.detect.N > 0 {
			v := x.detect.P99.Seconds()
			ylo, yhi = min(ylo, v), max(yhi, v)
		}
	}
	if math.IsInf(ylo, 1) {
		ylo, yhi = 0, 1
	}
	pad := max((yhi-ylo)*0.1, 0.1)
	ya := niceAxis(max(0, ylo-pad), yhi+pad)

	// The data sit inset from the frame, so that points at zero false
	// deaths (often most of them) are not drawn on the axis line.
	const inset = 12
	px := func(v float64) float64 { return padLeft + inset + xa.frac(v)*(plotW-2*inset) }
	py := func(v float64) float64 { return padTop + plotH - ya.frac(v)*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="%d">`+"\n",
		svgW, svgH, svgW, svgH, fontSize)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="14" font-weight="bold">%s</text>`+"\n", padLeft, esc("swim tune: crash detection against false deaths"))
	fmt.Fprintf(&b, `<text x="%d" y="42">%s</text>`+"\n", padLeft, esc(scenarioLine(o)))
	fmt.Fprintf(&b, `<text x="%d" y="58" fill="#555">%s</text>`+"\n", padLeft,
		esc(fmt.Sprintf("%d seed(s) x %v per setting; filled: meets the budget, hollow: does not; ring: recommended", o.seeds, o.duration)))

	// Grid lines and ticks.
	b.WriteString(`<g class="axes" stroke="#ddd">` + "\n")
	for _, t := range xa.ticks() {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>`+"\n", px(t), padTop, px(t), padTop+plotH)
	}
	for _, t := range ya.ticks() {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`+"\n", padLeft, py(t), padLeft+plotW, py(t))
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>`+"\n", padLeft, padTop, plotW, plotH)
	for _, t := range xa.ticks() {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/>`+"\n", px(t), padTop+plotH, px(t), padTop+plotH+5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px(t), padTop+plotH+18, tickLabel(t, xa.step))
	}
	for _, t := range ya.ticks() {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black"/>`+"\n", padLeft-5, py(t), padLeft, py(t))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", padLeft-8, py(t)+4, tickLabel(t, ya.step))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", padLeft+plotW/2, svgH-22,
		esc("false deaths per member-hour"))
	fmt.Fprintf(&b, `<text transform="translate(22 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", padTop+plotH/2,
		esc("detection p99 (crash until every survivor knows), s"))

	// The budget line, when it is inside the axis.
	if bx := px(o.budget); o.budget <= xa.hi {
		fmt.Fprintf(&b, `<line class="budget" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#c00" stroke-dasharray="6 4"/>`+"\n", bx, padTop, bx, padTop+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#c00">%s</text>`+"\n", bx+4, padTop+12, esc("budget "+rate(o.budget)))
	}

	// Points first, then labels placed greedily where they overlap neither
	// another label nor the plot's edge.
	manySM := false
	for _, x := range outs {
		manySM = manySM || x.SuspicionMult != outs[0].SuspicionMult
	}
	colorOf := map[int]string{}
	var ks []int
	for _, x := range outs {
		if _, ok := colorOf[x.K]; !ok {
			colorOf[x.K] = palette[len(colorOf)%len(palette)]
			ks = append(ks, x.K)
		}
	}
	type placed struct {
		x, y  float64
		label string
		bold  bool
	}
	var points []placed
	b.WriteString(`<g class="points">` + "\n")
	for i, x := range outs {
		cx := px(x.deathRate)
		cy := float64(padTop)
		if x.detect.N > 0 {
			cy = py(x.detect.P99.Seconds())
		}
		fill := colorOf[x.K]
		if !x.meets {
			fill = "white"
		}
		label := fmt.Sprintf("k=%d T=%v", x.K, x.Tolerance)
		if manySM {
			label += fmt.Sprintf(" SM=%d", x.SuspicionMult)
		}
		if x.detect.N == 0 {
			label += " (none detected)"
		}
		tip := fmt.Sprintf("%v: detection p50 %s p99 %s, %s false deaths and %s false suspicions per member-hour, %.0f bytes/member/s",
			x.setting, secs(x.detect.P50), secs(x.detect.P99), rate(x.deathRate), rate(x.suspicionRate), x.bytesPerSecond)
		fmt.Fprintf(&b, `<circle class="setting" cx="%.1f" cy="%.1f" r="5" fill="%s" stroke="%s" stroke-width="2"><title>%s</title></circle>`+"\n",
			cx, cy, fill, colorOf[x.K], esc(tip))
		if i == best {
			fmt.Fprintf(&b, `<circle class="best" cx="%.1f" cy="%.1f" r="10" fill="none" stroke="black" stroke-width="2"/>`+"\n", cx, cy)
		}
		points = append(points, placed{cx, cy, label, i == best})
	}
	b.WriteString("</g>\n")

	var taken []box
	for _, p := range points { // the points themselves are not to be covered
		taken = append(taken, box{p.x - 6, p.y - 6, p.x + 6, p.y + 6})
	}
	b.WriteString(`<g class="labels">` + "\n")
	for _, p := range points {
		w := charW * float64(len(p.label))
		var chosen box
		found := false
		for _, dy := range []float64{0, -13, 13, -26, 26, -39, 39, -52, 52} {
			for _, dx := range []float64{9, -9 - w} {
				c := box{p.x + dx, p.y + dy - 8, p.x + dx + w, p.y + dy + 4}
				if c.x0 < padLeft || c.x1 > svgW-4 || c.y0 < padTop || c.y1 > padTop+plotH {
					continue
				}
				clear := true
				for _, t := range taken {
					if c.overlaps(t) {
						clear = false
						break
					}
				}
				if clear {
					chosen, found = c, true
					break
				}
			}
			if found {
				break
			}
		}
		if !found {
			chosen = box{p.x + 9, p.y - 8, p.x + 9 + w, p.y + 4}
		}
		taken = append(taken, chosen)
		weight := ""
		if p.bold {
			weight = ` font-weight="bold"`
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f"%s>%s</text>`+"\n", chosen.x0, chosen.y1-2, weight, esc(p.label))
		// A leader line when the label had to move away from its point.
		if math.Abs((chosen.y0+chosen.y1)/2-p.y) > 8 {
			lx := chosen.x0
			if chosen.x0 < p.x {
				lx = chosen.x1
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999"/>`+"\n", p.x, p.y, lx, (chosen.y0+chosen.y1)/2)
		}
	}
	b.WriteString("</g>\n")

	// Legend: the colour of each IndirectChecks value.
	lx, ly := padLeft+plotW+20, padTop+10
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">IndirectChecks</text>`+"\n", lx, ly)
	for i, k := range ks {
		y := ly + 18*(i+1)
		fmt.Fprintf(&b, `<circle cx="%d" cy="%d" r="5" fill="%s"/>`+"\n", lx+5, y-4, colorOf[k])
		fmt.Fprintf(&b, `<text x="%d" y="%d">k=%d</text>`+"\n", lx+16, y, k)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555">T = PauseTolerance</text>`+"\n", lx, ly+18*(len(ks)+2))
	b.WriteString("</svg>\n")
	return b.String()
}

func writeSVGFile(path string, o *options, outs []outcome, best int) error {
	if err := os.WriteFile(path, []byte(renderSVG(o, outs, best)), 0o644); err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	return nil
}
