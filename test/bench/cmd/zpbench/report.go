package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// summary is the median, min and max of a sample.
type summary struct {
	N                int
	Median, Min, Max float64
}

func summarize(xs []float64) summary {
	if len(xs) == 0 {
		return summary{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return summary{N: len(s), Median: m, Min: s[0], Max: s[len(s)-1]}
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var t float64
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

func stddev(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	m := mean(xs)
	var t float64
	for _, x := range xs {
		t += (x - m) * (x - m)
	}
	return math.Sqrt(t / float64(len(xs)))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// row is one line of the results table.
type row struct {
	Figure string
	Runs   int
	Median string
	Min    string
	Max    string
	Target string
	Result string // PASS, FAIL or "not run"
	Note   string // shown after the result
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// writeTable prints the rows as a Markdown table.
func writeTable(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| figure | runs | median | min | max | target | result |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---|---|")
	for _, r := range rows {
		note := ""
		if r.Note != "" {
			note = " (" + r.Note + ")"
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | **%s**%s |\n", r.Figure, r.Runs, r.Median, r.Min, r.Max, r.Target, r.Result, note)
	}
}

// sparkline draws counts as block characters scaled to the largest
// count; an empty bucket is a space.
func sparkline(counts []int) string {
	const blocks = "▁▂▃▄▅▆▇█"
	levels := []rune(blocks)
	top := 0
	for _, c := range counts {
		top = max(top, c)
	}
	var b strings.Builder
	for _, c := range counts {
		if c == 0 || top == 0 {
			b.WriteByte(' ')
			continue
		}
		i := int(math.Ceil(float64(c)/float64(top)*float64(len(levels)))) - 1
		b.WriteRune(levels[min(max(i, 0), len(levels)-1)])
	}
	return b.String()
}

// histogram counts times into width-sized buckets from start; times
// outside [start, start+n*width) are ignored.
func histogram(times []time.Time, start time.Time, width time.Duration, n int) []int {
	out := make([]int, n)
	for _, t := range times {
		d := t.Sub(start)
		if d < 0 {
			continue
		}
		if i := int(d / width); i < n {
			out[i]++
		}
	}
	return out
}

func fmtMs(v float64) string  { return fmt.Sprintf("%.1f ms", v) }
func fmtS(v float64) string   { return fmt.Sprintf("%.2f s", v) }
func fmtMiB(v float64) string { return fmt.Sprintf("%.1f MiB", v) }
func kib2mib(k int64) float64 { return float64(k) / 1024 }
