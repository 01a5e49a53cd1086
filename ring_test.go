package swim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// The blocked ring must behave exactly like a sorted slice, across block
// splits and emptied blocks.
func TestRingListMatchesSortedSlice(t *testing.T) {
	const ids = 3000
	names := make(nameList, ids)
	o := ringOrder{keys: make([]uint64, ids), names: names}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range ids {
		names[i] = fmt.Sprintf("m%d", i)
		o.keys[i] = rng.Uint64() % 500 // collisions: names break the ties
	}
	var r ringList
	var ref []uint32
	check := func() {
		require.Equal(t, len(ref), r.len())
		var got []uint32
		r.each(func(id uint32) { got = append(got, id) })
		require.Equal(t, ref, got)
		for range 20 {
			if len(ref) == 0 {
				break
			}
			i := rng.IntN(len(ref))
			require.Equal(t, ref[i], r.at(i))
			require.Equal(t, i, r.index(o, ref[i]))
		}
	}
	for step := range 20000 {
		id := uint32(rng.IntN(ids))
		i, found := slices.BinarySearchFunc(ref, id, o.cmp)
		// Grow for the first half, then shrink, so blocks both split
		// and empty.
		if step < 10000 || rng.IntN(3) == 0 {
			require.Equal(t, !found, r.insert(o, id))
			if !found {
				ref = slices.Insert(ref, i, id)
			}
		} else {
			require.Equal(t, found, r.remove(o, id))
			if found {
				ref = slices.Delete(ref, i, i+1)
			} else {
				require.Equal(t, -1, r.index(o, id))
			}
		}
		if step%500 == 0 {
			check()
		}
	}
	check()
	require.Greater(t, len(r.blocks), 1)
}

// nameList is a nameSource of fixed names.
type nameList []string

func (l nameList) name(id uint32) string { return l[id] }
