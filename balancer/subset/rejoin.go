package subset

import (
	"cmp"
	"slices"
)

// This file is the rejoin hold (Config.RejoinHold): a backend that left the
// resolver's list and came back is kept out of the subsets until it has
// been back for the hold, so that a backend that flaps does not take its
// slots back, and make clients reconnect, on every return.

// rejoinForget is how long, in holds, a backend that left is remembered:
// one that comes back after that is a newcomer and joins at once.
const rejoinForget = 10

// rejoinTracker remembers which backends left, and since when the ones
// that came back have been present.
type rejoinTracker struct {
	present map[string]bool  // the identities of the last update
	leftAt  map[string]int64 // identities that left, and when
	backAt  map[string]int64 // returners still held, and when they came back
}

// admit returns ids without the returners still held at now, and the
// earliest moment one of those is readmitted (0: none is held). ids are
// the update's distinct identities. While fewer than need would be left,
// the longest-held returners are admitted anyway: a hold protects caches,
// and is no reason to leave a client with too few backends, or none after
// an update that emptied the list.
func (r *rejoinTracker) admit(ids []string, need int, now, hold int64) (admitted []string, next int64) {
	if r.leftAt == nil {
		r.leftAt, r.backAt = map[string]int64{}, map[string]int64{}
	}
	present := make(map[string]bool, len(ids))
	for _, id := range ids {
		present[id] = true
	}
	for id := range r.present {
		if !present[id] {
			r.leftAt[id] = now
			delete(r.backAt, id)
		}
	}
	for id, at := range r.leftAt {
		switch {
		case now-at > rejoinForget*hold:
			// Gone so long that it comes back as a newcomer.
			delete(r.leftAt, id)
		case present[id]:
			delete(r.leftAt, id)
			r.backAt[id] = now
		}
	}
	r.present = present
	admitted = make([]string, 0, len(ids))
	var held []string
	for _, id := range ids {
		if at, ok := r.backAt[id]; ok && now-at < hold {
			held = append(held, id)
			continue
		}
		delete(r.backAt, id)
		admitted = append(admitted, id)
	}
	if short := min(need, len(ids)) - len(admitted); short > 0 {
		slices.SortFunc(held, func(a, b string) int {
			return cmp.Or(cmp.Compare(r.backAt[a], r.backAt[b]), cmp.Compare(a, b))
		})
		admitted = append(admitted, held[:short]...)
		held = held[short:]
	}
	for _, id := range held {
		if due := r.backAt[id] + hold; next == 0 || due < next {
			next = due
		}
	}
	return admitted, next
}
