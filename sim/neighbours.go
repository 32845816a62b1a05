package sim

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"time"
)

// Neighbours draws the slowdowns noisy neighbours cause (Backend.Slow):
// each backend is slowed now and then, for a window of a length between
// Min and Max, by a factor between MinFactor and MaxFactor, with gaps
// between its windows exponential of mean Gap. Each backend's windows come
// from Seed and its index, so every policy of a scenario meets the same
// ones.
type Neighbours struct {
	Min, Max             time.Duration
	MinFactor, MaxFactor float64
	Gap                  time.Duration
	// MaxSlowed, when positive, is the most backends slowed at once: a
	// window that would start while as many are slowed is dropped, so
	// that a fleet never loses more capacity than a scenario means it to.
	MaxSlowed int
	Seed      uint64
}

// Slowdowns returns n backends' windows up to horizon.
func (nb Neighbours) Slowdowns(n int, horizon time.Duration) [][]Window {
	type drawn struct {
		id int
		w  Window
	}
	var all []drawn
	for id := range n {
		for _, w := range nb.backend(id, horizon) {
			all = append(all, drawn{id, w})
		}
	}
	slices.SortStableFunc(all, func(a, b drawn) int { return cmp.Compare(a.w.From, b.w.From) })
	out := make([][]Window, n)
	var kept []Window
	for _, d := range all {
		active := 0
		for _, k := range kept {
			if k.From <= d.w.From && d.w.From < k.To {
				active++
			}
		}
		if nb.MaxSlowed <= 0 || active < nb.MaxSlowed {
			kept = append(kept, d.w)
			out[d.id] = append(out[d.id], d.w)
		}
	}
	return out
}

// backend returns backend id's windows up to horizon, before MaxSlowed
// drops any. Windows and gaps alternate from well before 0, so that at 0
// a backend is as likely to be mid-slowdown as at any other time; a
// window that began before 0 is cut there.
func (nb Neighbours) backend(id int, horizon time.Duration) []Window {
	r := rand.New(rand.NewPCG(nb.Seed, uint64(id)))
	var out []Window
	for t := -4 * nb.Gap; t < horizon; {
		t += time.Duration(r.ExpFloat64() * float64(nb.Gap))
		length := nb.Min + time.Duration(r.Float64()*float64(nb.Max-nb.Min))
		factor := nb.MinFactor + (nb.MaxFactor-nb.MinFactor)*r.Float64()
		if t+length > 0 && t < horizon {
			out = append(out, Window{From: max(t, 0), To: t + length, Factor: factor})
		}
		t += length
	}
	return out
}

// Slowed reports whether windows ws slow their backend at t.
func Slowed(ws []Window, t time.Duration) bool {
	return slices.ContainsFunc(ws, func(w Window) bool { return t >= w.From && t < w.To })
}
