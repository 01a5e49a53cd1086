package main

import (
	"reflect"
)

// sumUintFields adds the uint64 fields of the struct v, of the structs it
// embeds and of its groups, to sum by name (a group's by its path). swim's counters are read this way rather than
// field by field so that the command keeps building while the library's
// Stats gains or renames counters; a counter it does not have reads 0.
func sumUintFields(sum map[string]uint64, v reflect.Value) {
	sumUintFieldsAt(sum, v, "")
}

// sumUintFieldsAt adds v's fields under prefix: the embedded Stats's
// without one, its groups' under their path ("Broadcasts.Delivered").
func sumUintFieldsAt(sum map[string]uint64, v reflect.Value, prefix string) {
	t := v.Type()
	for i := range t.NumField() {
		f, sf := v.Field(i), t.Field(i)
		switch {
		case sf.Anonymous && f.Kind() == reflect.Struct:
			sumUintFieldsAt(sum, f, prefix)
		case f.Kind() == reflect.Struct && sf.IsExported():
			sumUintFieldsAt(sum, f, prefix+sf.Name+".")
		case f.Kind() == reflect.Uint64:
			sum[prefix+sf.Name] += f.Uint()
		}
	}
}
