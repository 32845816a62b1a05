package loadest

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const ms = time.Millisecond

// sample folds one call that found rif calls in flight and took lat,
// ending at now, and leaves rif calls in flight.
func sample(e *Estimator, rif int64, now, lat time.Duration) {
	e.rif.Store(rif)
	e.End(e.Begin(), now, lat)
}

// near reports whether got is within the packing's precision of want.
func near(got, want time.Duration) bool {
	return math.Abs(float64(got-want)) <= 1e-4*float64(want)+1
}

func TestBandOf(t *testing.T) {
	tests := []struct {
		rif  int64
		want int
	}{
		{-3, 0}, {0, 0}, {1, 1}, {7, 7},
		{8, 8}, {11, 8}, {12, 9}, {15, 9},
		{16, 10}, {23, 10}, {24, 11}, {31, 11},
		{32, 12}, {47, 12}, {48, 13},
		{1<<16 - 1, numBands - 1}, {1 << 16, numBands - 1}, {math.MaxInt64, numBands - 1},
	}
	for _, tc := range tests {
		if got := bandOf(tc.rif); got != tc.want {
			t.Errorf("bandOf(%d) = %d, want %d", tc.rif, got, tc.want)
		}
	}
}

// TestBandRIF: bands are contiguous and in order, and each band's
// representative RIF lies within it.
func TestBandRIF(t *testing.T) {
	lo := map[int]int64{}
	hi := map[int]int64{}
	prev := 0
	for r := int64(0); r < 1<<16; r++ {
		b := bandOf(r)
		if b != prev && b != prev+1 {
			t.Fatalf("bandOf(%d) = %d after band %d", r, b, prev)
		}
		prev = b
		if _, ok := lo[b]; !ok {
			lo[b] = r
		}
		hi[b] = r
	}
	if len(lo) != numBands {
		t.Fatalf("%d bands used, want %d", len(lo), numBands)
	}
	for b := range numBands {
		if mid := bandRIF[b]; mid < float64(lo[b]) || mid > float64(hi[b]) {
			t.Errorf("band %d: [%d, %d], representative RIF %v outside it", b, lo[b], hi[b], mid)
		}
	}
}

func TestLoad(t *testing.T) {
	type call struct {
		rif      int64
		now, lat time.Duration
	}
	tests := []struct {
		name    string
		calls   []call
		rif     int64 // in flight when asked
		now     time.Duration
		want    time.Duration
		wantRIF int
	}{
		{name: "no data", rif: 0, now: time.Second, want: 0},
		{name: "no data, busy", rif: 5, now: time.Second, want: 0, wantRIF: 5},
		{name: "negative RIF reads as idle", rif: -1, now: 0, want: 0},
		{
			name:  "own band",
			calls: []call{{2, 0, 10 * ms}},
			rif:   2, now: time.Second, want: 10 * ms, wantRIF: 2,
		},
		{
			// weight 1-exp(-1) after a gap of DecayTime
			name:  "average decays with the gap",
			calls: []call{{2, 0, 10 * ms}, {2, time.Second, 20 * ms}},
			rif:   2, now: time.Second, want: time.Duration(10e6 + 10e6*(1-math.Exp(-1))), wantRIF: 2,
		},
		{
			name:  "same millisecond weighs MinWeight",
			calls: []call{{2, 5 * ms, 10 * ms}, {2, 5 * ms, 42 * ms}},
			rif:   2, now: 5 * ms, want: 11 * ms, wantRIF: 2,
		},
		{
			name:  "fresh just before StaleAfter",
			calls: []call{{0, 0, 10 * ms}},
			rif:   0, now: StaleAfter - ms, want: 10 * ms,
		},
		{
			name:  "stale at StaleAfter",
			calls: []call{{0, 0, 10 * ms}},
			rif:   0, now: StaleAfter, want: 0,
		},
		{
			name:  "a stale band starts over",
			calls: []call{{0, 0, 10 * ms}, {0, StaleAfter, 20 * ms}},
			rif:   0, now: StaleAfter, want: 20 * ms,
		},
		{
			name:  "scaled up from the band below",
			calls: []call{{1, 0, 10 * ms}},
			rif:   3, now: 0, want: 20 * ms, wantRIF: 3, // 10 ms x (3+1)/(1+1)
		},
		{
			name:  "scaled down from the band above",
			calls: []call{{7, 0, 80 * ms}},
			rif:   3, now: 0, want: 40 * ms, wantRIF: 3, // 80 ms x (3+1)/(7+1)
		},
		{
			name:  "interpolated between bands on both sides",
			calls: []call{{1, 0, 10 * ms}, {5, 0, 50 * ms}},
			rif:   3, now: 0, want: 30 * ms, wantRIF: 3,
		},
		{
			name:  "the nearest band below wins",
			calls: []call{{1, 0, 10 * ms}, {2, 0, 30 * ms}},
			rif:   5, now: 0, want: 60 * ms, wantRIF: 5, // 30 ms x 6/3
		},
		{
			name:  "a log band covers its range",
			calls: []call{{9, 0, 100 * ms}},
			rif:   11, now: 0, want: 100 * ms, wantRIF: 11,
		},
		{
			name:  "scaled from a log band's middle",
			calls: []call{{8, 0, 105 * ms}},
			rif:   20, now: 0, want: 210 * ms, wantRIF: 20, // 105 ms x 21/10.5
		},
		{
			name:  "a stale neighbour is skipped",
			calls: []call{{1, 0, 10 * ms}, {2, 2 * time.Second, 30 * ms}},
			rif:   5, now: 4 * time.Second, want: 60 * ms, wantRIF: 5,
		},
		{
			name:  "a zero latency is known, not unknown",
			calls: []call{{0, 0, 0}},
			rif:   0, now: 0, want: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e Estimator
			for _, c := range tc.calls {
				sample(&e, c.rif, c.now, c.lat)
			}
			e.rif.Store(tc.rif)
			rif, got := e.Load(tc.now)
			if rif != tc.wantRIF || !near(got, tc.want) {
				t.Errorf("Load(%v) = %d, %v; want %d, %v", tc.now, rif, got, tc.wantRIF, tc.want)
			}
		})
	}
}

func TestTokenRIF(t *testing.T) {
	var e Estimator
	a, b := e.Begin(), e.Begin()
	if a.RIF() != 0 || b.RIF() != 1 {
		t.Errorf("tokens found RIF %d and %d, want 0 and 1", a.RIF(), b.RIF())
	}
	e.Drop(a)
	e.End(b, 0, ms)
	if rif, _ := e.Load(0); rif != 0 {
		t.Errorf("RIF after both ended = %d, want 0", rif)
	}
	// b found one call in flight: its latency went to band 1.
	if _, v, ok := unpack(e.bands[1].Load()); !ok || v != float64(ms) {
		t.Errorf("band 1 = %v, %v; want %v", v, ok, float64(ms))
	}
}

// TestSlowdownFades: a server answers in 10 ms at 2 calls in flight and
// is slowed to 200 ms for 3 s, during which its calls find 2 or 6 calls in
// flight, then recovers at 2. The estimate at 2 is back near 10 ms within
// 2 s of the calls that correct it, and the estimate at 6, where no call
// comes after the slowdown, stops reporting it once that band goes stale.
func TestSlowdownFades(t *testing.T) {
	var e Estimator
	now := time.Duration(0)
	run := func(rifs []int64, lat, until time.Duration) {
		for i := 0; now < until; i++ { // 100 calls a second
			sample(&e, rifs[i%len(rifs)], now, lat)
			now += 10 * ms
		}
	}
	at := func(rif int64) time.Duration {
		e.rif.Store(rif)
		_, v := e.Load(now)
		return v
	}

	run([]int64{2}, 10*ms, 5*time.Second)
	run([]int64{2, 6}, 200*ms, 8*time.Second)
	if v2, v6 := at(2), at(6); v2 < 190*ms || !near(v6, 200*ms) {
		t.Fatalf("during the slowdown, estimates at RIF 2 and 6 = %v, %v; want about 200ms", v2, v6)
	}
	slowEnd := now
	run([]int64{2}, 10*ms, slowEnd+time.Second)
	if v := at(6); v < 190*ms {
		t.Errorf("1s after the slowdown, estimate at RIF 6 = %v: band 6 should still be fresh", v)
	}
	run([]int64{2}, 10*ms, slowEnd+2*time.Second)
	if v := at(2); v > 11*ms {
		t.Errorf("2s after the slowdown, estimate at RIF 2 = %v, want <= 11ms", v)
	}
	run([]int64{2}, 10*ms, slowEnd+StaleAfter)
	// Band 6 is stale: RIF 6 is scaled from band 2, x 7/3.
	if v, want := at(6), at(2)*7/3; !near(v, want) {
		t.Errorf("%v after the slowdown, estimate at RIF 6 = %v, want %v", StaleAfter, v, want)
	}
}

// TestConcurrent runs Begin, End and Load from many goroutines: RIF
// returns to 0 and every band's average stays within the latencies fed.
func TestConcurrent(t *testing.T) {
	var e Estimator
	var clock atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				tok := e.Begin()
				now := time.Duration(clock.Add(int64(50 * time.Microsecond)))
				if i%10 == 0 {
					e.Drop(tok)
				} else {
					e.End(tok, now, time.Duration(1+(g+i)%2)*ms)
				}
				if rif, v := e.Load(now); rif < 0 || v < 0 {
					t.Errorf("Load = %d, %v", rif, v)
					return
				}
			}
		})
	}
	wg.Wait()
	if rif, _ := e.Load(0); rif != 0 {
		t.Errorf("RIF after every call ended = %d, want 0", rif)
	}
	for b := range numBands {
		if _, v, ok := unpack(e.bands[b].Load()); ok && (v < float64(ms)*0.9999 || v > float64(2*ms)*1.0001) {
			t.Errorf("band %d average %v outside [1ms, 2ms]", b, time.Duration(v))
		}
	}
}

func TestNoAllocs(t *testing.T) {
	var e Estimator
	sample(&e, 0, 0, ms)
	e.rif.Store(0)
	if n := testing.AllocsPerRun(100, func() {
		e.End(e.Begin(), ms, ms)
		e.Load(ms)
	}); n != 0 {
		t.Errorf("Begin+End+Load allocate %v times, want 0", n)
	}
}

func TestPackRoundTrip(t *testing.T) {
	for _, v := range []float64{0, 1, 999, 1e6, 12345678, 3.6e12} {
		ms, got, ok := unpack(pack(41, v))
		if !ok || ms != 41 || math.Abs(got-v) > 3.1e-5*v {
			t.Errorf("unpack(pack(41, %v)) = %v, %v, %v", v, ms, got, ok)
		}
	}
}

func BenchmarkBeginEnd(b *testing.B) {
	var e Estimator
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		e.End(e.Begin(), time.Duration(i)*time.Microsecond, ms)
	}
}

// BenchmarkBeginEndParallel: every core ends calls into the same bands.
func BenchmarkBeginEndParallel(b *testing.B) {
	var e Estimator
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			e.End(e.Begin(), time.Duration(i)*time.Microsecond, ms)
		}
	})
}

func BenchmarkLoad(b *testing.B) {
	b.Run("own-band", func(b *testing.B) {
		var e Estimator
		sample(&e, 3, 0, ms)
		b.ReportAllocs()
		for b.Loop() {
			e.Load(ms)
		}
	})
	// The longest search: RIF in the last band, data in band 0 only.
	b.Run("fallback", func(b *testing.B) {
		var e Estimator
		sample(&e, 0, 0, ms)
		e.rif.Store(1 << 20)
		b.ReportAllocs()
		for b.Loop() {
			e.Load(ms)
		}
	})
}
