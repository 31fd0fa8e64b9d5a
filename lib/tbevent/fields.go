package tbevent

import (
	"reflect"
	"slices"
	"strings"
)

// Fields turns the numeric fields of a struct (a metrics row) into scalars
// tagged prefix + "/" + the field's JSON name, in field order. Nil pointer
// fields (metrics the run did not compute) are left out, as are the names in
// skip and fields without a JSON name. step, epoch and the like are scalars
// too: TensorBoard plots them against the event's step.
func Fields(prefix string, row any, skip ...string) []Scalar {
	v := reflect.Indirect(reflect.ValueOf(row))
	if v.Kind() != reflect.Struct {
		return nil
	}
	var out []Scalar
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || !f.IsExported() || slices.Contains(skip, name) {
			continue
		}
		x := v.Field(i)
		if x.Kind() == reflect.Pointer {
			if x.IsNil() {
				continue
			}
			x = x.Elem()
		}
		var val float64
		switch x.Kind() {
		case reflect.Float32, reflect.Float64:
			val = x.Float()
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			val = float64(x.Int())
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			val = float64(x.Uint())
		default:
			continue
		}
		out = append(out, Scalar{Tag: prefix + "/" + name, Value: val})
	}
	return out
}
