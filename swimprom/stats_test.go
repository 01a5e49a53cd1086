package swimprom

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim"
)

// numericFields lists the numeric fields of t, walking embedded structs,
// by name.
func numericFields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Struct {
			// The embedded Stats, and its groups, whose fields are
			// named by their path ("Trees.PushesSent").
			for _, sub := range numericFields(f.Type) {
				sub.Index = append([]int{i}, sub.Index...)
				if !f.Anonymous {
					sub.Name = f.Name + "." + sub.Name
				}
				out = append(out, sub)
			}
			continue
		}
		switch f.Type.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Float32, reflect.Float64:
			out = append(out, f)
		}
	}
	return out
}

// TestEveryStat: every numeric field of MemberlistStats, those of the
// embedded core Stats included, has exactly one metric, of the type its
// Go type says, so a counter added to the core without a metric fails
// here.
func TestEveryStat(t *testing.T) {
	fields := numericFields(reflect.TypeFor[swim.MemberlistStats]())
	require.Greater(t, len(fields), 60, "the walk found the embedded Stats")
	specs := make(map[string]int)
	for _, s := range statSpecs {
		specs[s.field]++
	}
	for _, f := range fields {
		require.Equal(t, 1, specs[f.Name], "MemberlistStats.%s needs one entry in statSpecs (stats.go) and a line in docs/metrics.md", f.Name)
		delete(specs, f.Name)
	}
	require.Empty(t, specs, "statSpecs names fields MemberlistStats lacks")
}

// TestStatSpecs: the table's names follow Prometheus's conventions and a
// metric shared by several fields is told apart by its reason label.
func TestStatSpecs(t *testing.T) {
	type metric struct {
		counter  bool
		byReason bool
		reasons  map[string]bool
	}
	seen := make(map[string]*metric)
	for _, f := range statFields {
		require.Regexp(t, `^[a-z][a-z0-9_]*[a-z0-9]$`, f.name)
		require.Equal(t, f.counter, strings.HasSuffix(f.name, "_total"),
			"%s: counters end in _total, gauges do not", f.field)
		m := seen[f.name]
		if m == nil {
			require.NotEmpty(t, f.help, "%s: the first field of a metric carries its help", f.field)
			require.True(t, strings.HasSuffix(f.help, "."), "%s: help is a sentence", f.field)
			m = &metric{counter: f.counter, byReason: f.reason != "", reasons: make(map[string]bool)}
			seen[f.name] = m
		} else {
			require.Empty(t, f.help, "%s: only the first field of %s carries its help", f.field, f.name)
			require.NotEmpty(t, f.reason, "%s shares %s, so it needs a reason", f.field, f.name)
		}
		require.Equal(t, m.counter, f.counter, "%s: every field of %s has one type", f.field, f.name)
		require.False(t, m.reasons[f.reason], "%s: reason %q taken", f.field, f.reason)
		m.reasons[f.reason] = true
		require.Equal(t, m.byReason, f.reason != "", "%s: every field of %s has a reason, or none", f.field, f.name)
	}
}

// fixedStats collects a Collector's stat metrics from st, as Collect
// would from an attached member.
type fixedStats struct {
	c  *Collector
	st swim.MemberlistStats
}

func (f fixedStats) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range f.c.statDescs {
		ch <- d
	}
}

func (f fixedStats) Collect(ch chan<- prometheus.Metric) { f.c.collectStats(ch, f.st) }

// TestStatValues: each field's value reaches its own metric. Every
// numeric field gets a distinct value; the gathered samples must be
// exactly those values, each at the metric and reason its field maps to.
func TestStatValues(t *testing.T) {
	var st swim.MemberlistStats
	v := reflect.ValueOf(&st).Elem()
	want := make(map[string]float64) // "name{reason}" -> value
	byField := make(map[string]statSpec)
	for _, s := range statSpecs {
		byField[s.field] = s
	}
	for i, f := range numericFields(v.Type()) {
		val := 1000 + i
		fv := v.FieldByIndex(f.Index)
		if fv.CanUint() {
			fv.SetUint(uint64(val))
		} else {
			fv.SetInt(int64(val))
		}
		s := byField[f.Name]
		want[fmt.Sprintf("swim_%s{%s}", s.name, s.reason)] = float64(val)
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(fixedStats{c: New(), st: st})
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := make(map[string]float64)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			reason := ""
			for _, l := range m.GetLabel() {
				require.Equal(t, "reason", l.GetName())
				reason = l.GetValue()
			}
			val := m.GetGauge().GetValue()
			if m.GetCounter() != nil {
				val = m.GetCounter().GetValue()
			}
			got[fmt.Sprintf("%s{%s}", mf.GetName(), reason)] = val
		}
	}
	require.Equal(t, want, got)
}
