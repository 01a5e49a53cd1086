package main

import (
	"reflect"
)

// sumUintFields adds the uint64 fields of the struct v, and of the structs
// it embeds, to sum by name. swim's counters are read this way rather than
// field by field so that the command keeps building while the library's
// Stats gains or renames counters; a counter it does not have reads 0.
func sumUintFields(sum map[string]uint64, v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		f := v.Field(i)
		switch {
		case t.Field(i).Anonymous && f.Kind() == reflect.Struct:
			sumUintFields(sum, f)
		case f.Kind() == reflect.Uint64:
			sum[t.Field(i).Name] += f.Uint()
		}
	}
}
