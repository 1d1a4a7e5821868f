package linreg

import (
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The model must find what it is for: these histories are made up.

func op(client int, call, ret int64, in Input, out Output) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Return: ret, Output: out}
}

func TestRegisterModel(t *testing.T) {
	const never = math.MaxInt64
	k, k2 := "/reg/r0/k0", "/reg/r0/k1"
	create := func(v string) Input { return Input{Op: Create, Key: k, Value: v} }
	set := func(v string) Input { return Input{Op: Set, Key: k, Value: v} }
	get := Input{Op: Get, Key: k}
	del := Input{Op: Delete, Key: k}
	ok := Output{OK: true}
	unknown := Output{Unknown: true}
	read := func(v string) Output { return Output{Exists: true, Value: v} }
	absent := Output{}
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"sequential", []porcupine.Operation{
			op(0, 0, 1, get, absent), op(0, 2, 3, create("a"), ok), op(1, 4, 5, get, read("a")),
			op(0, 6, 7, set("b"), ok), op(1, 8, 9, get, read("b")), op(0, 10, 11, del, ok),
			op(1, 12, 13, get, absent), op(1, 14, 15, set("c"), Output{}), op(0, 16, 17, del, Output{}),
		}, porcupine.Ok},
		{"concurrent write, either order read", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok), op(0, 2, 10, set("b"), ok), op(1, 3, 4, get, read("a")), op(1, 5, 6, get, read("b")),
		}, porcupine.Ok},
		{"stale read", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok), op(0, 2, 3, set("b"), ok), op(1, 4, 5, get, read("a")),
		}, porcupine.Illegal},
		{"read goes back", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok), op(0, 2, 10, set("b"), ok), op(1, 3, 4, get, read("b")), op(2, 5, 6, get, read("a")),
		}, porcupine.Illegal},
		{"lost acknowledged write", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok), op(0, 2, 3, set("b"), ok), op(1, 100, 101, get, read("a")),
		}, porcupine.Illegal},
		{"create over an existing node", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok), op(1, 2, 3, create("b"), ok),
		}, porcupine.Illegal},
		{"unknown write applied late", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok), op(0, 2, never, set("b"), unknown), op(1, 4, 5, get, read("a")), op(1, 6, 7, get, read("b")),
		}, porcupine.Ok},
		{"unknown write never applied", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok), op(0, 2, never, set("b"), unknown), op(1, 100, 101, get, read("a")),
		}, porcupine.Ok},
		{"unknown write applied then undone", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok), op(0, 2, never, set("b"), unknown), op(1, 4, 5, get, read("b")), op(1, 6, 7, get, read("a")),
		}, porcupine.Illegal},
		{"unknown delete", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok), op(0, 2, never, del, unknown), op(1, 4, 5, get, read("a")), op(1, 6, 7, get, absent),
		}, porcupine.Ok},
		{"keys are independent", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok),
			op(1, 2, 3, Input{Op: Get, Key: k2}, absent),
			op(1, 4, 5, get, read("a")),
		}, porcupine.Ok},
		{"value read from another key", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok),
			op(1, 2, 3, Input{Op: Get, Key: k2}, read("a")),
		}, porcupine.Illegal},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperationsTimeout(Model, c.ops, 10*time.Second); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
