package ramp

import (
	"math"
	"testing"
	"time"

	"github.com/pickwise/pickwise/lbconfig"
)

func TestRampFactor(t *testing.T) {
	for _, tc := range []struct {
		aggression, minPct float64
		elapsed            time.Duration
		want               float64
	}{
		{1, 10, 0, 0.1},
		{1, 10, time.Second, 0.1},
		{1, 10, 5 * time.Second, 0.5},
		{1, 10, 10 * time.Second, 1},
		{1, 10, time.Hour, 1},
		{2, 10, 2500 * time.Millisecond, 0.5}, // 0.25^(1/2)
		{0.5, 1, 5 * time.Second, 0.25},       // 0.5^2
		{1, 0.001, 0, 1e-4},                   // Envoy's 1ms floor: 1ms/10s
	} {
		r := New(&lbconfig.SlowStartConfig{Enabled: true, Window: lbconfig.Duration(10 * time.Second), Aggression: tc.aggression, MinWeightPercent: tc.minPct})
		if got := r.Factor(int64(tc.elapsed)); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("aggression %v min %v%% at %v: factor %v, want %v", tc.aggression, tc.minPct, tc.elapsed, got, tc.want)
		}
	}
	if New(nil) != nil {
		t.Error("New(nil) is not nil")
	}
	if New(&lbconfig.SlowStartConfig{Window: lbconfig.Duration(10 * time.Second), Aggression: 1, MinWeightPercent: 10}) != nil {
		t.Error("New of a config with Enabled false is not nil")
	}
}

// TestRampSharesHoldShare: a ramping endpoint that would take every pick
// it is drawn into takes its ramped share of the picker's picks, counted
// from its draws (n/min(d, n) picks a draw); one that the loads kept
// under its share keeps no more than burst picks of credit when its
// share grows; and at the end of its ramp nothing holds it.
func TestRampSharesHoldShare(t *testing.T) {
	const draws = 10000
	s := NewShares(9, 9, 2, false) // nine endpoints of weight 1: a pick draws each with probability 2/9
	c := &Count{}
	took := 0
	for range draws {
		if !s.DrawnFull(c, 1, 0.1, true, false, 0) {
			c.Take()
			took++
		}
	}
	picks := draws * 9.0 / 2
	if want := 0.1 / 8.1 * picks; math.Abs(float64(took)-want) > 2 {
		t.Errorf("took %d picks of %.0f at factor 0.1, want %.1f (0.1/8.1 of them)", took, picks, want)
	}

	// Kept under its share by the loads: drawn and never taking a pick.
	c.Reset()
	for range draws {
		s.DrawnFull(c, 1, 0.1, true, false, 0)
	}
	// The factor has grown to 0.5: the credit its share now gives it
	// against every pick so far is forgotten but for burst picks.
	run := 0
	for !s.DrawnFull(c, 1, 0.5, true, false, 0) {
		c.Take()
		run++
	}
	// burst, the pick its share gives it anyway, and what that share
	// (0.5/8.5 of 4.5 picks a draw) earns over the run's own draws.
	if run < burst || run > burst+2 {
		t.Errorf("after its share grew, took %d picks in a row, want %d to %d", run, burst, burst+2)
	}

	c.took.Add(100) // far over any share it earned
	if s.DrawnFull(c, 1, 1, true, false, 0) {
		t.Error("full at the end of its ramp")
	}
}

// TestRampSharesOpening: while its opening is under way, a ramping
// endpoint drawn by a client whose picks come fast takes up to
// QuickAnswers picks ahead of its share, which it does not take again
// later; drawn by one whose picks come slowly, it takes nothing ahead.
func TestRampSharesOpening(t *testing.T) {
	ms := int64(time.Millisecond)
	s := NewShares(9, 9, 2, false)
	// took counts the picks taken over draws draws, at elapsed(k)
	// nanoseconds into the ramp for the k-th, with an opening of its
	// first QuickAnswers picks if opening.
	took := func(draws int, opening bool, elapsed func(k int) int64) int {
		c := &Count{}
		n := 0
		for k := range draws {
			if !s.DrawnFull(c, 1, 0.1, true, opening && n < QuickAnswers, elapsed(k)) {
				c.Take()
				n++
			}
		}
		return n
	}
	// 0.1 ms apart (taken as 1 ms, the least elapsed time DrawnFull
	// counts): a pick earns 0.1/8.1 x 4.5 = 0.056 picks a draw, 5.6
	// in 100 ms at that pace.
	fast := func(k int) int64 { return int64(k+1) * ms / 10 }
	if got := took(5, true, fast); got != QuickAnswers {
		t.Errorf("fast client, opening: took %d of its first 5 draws, want %d", got, QuickAnswers)
	}
	if got := took(5, false, fast); got != 1 {
		t.Errorf("fast client, no opening: took %d of its first 5 draws, want 1 (its first share)", got)
	}
	// Over its first 1,000 draws it takes what its share gives, the
	// opening's included: 1,000 x 0.056 = 56, and a pick or so more.
	if got := took(1000, true, fast); got < 55 || got > 58 {
		t.Errorf("fast client, opening: took %d picks over 1,000 draws, want its share, about 56", got)
	}
	// One draw every 200 ms: 0.056 picks earned a draw, 0.028 in 100 ms.
	slow := func(k int) int64 { return int64(k+1) * 200 * ms }
	if got := took(5, true, slow); got != 1 {
		t.Errorf("slow client, opening: took %d of its first 5 draws, want 1 (its first share), nothing ahead", got)
	}
}

// TestCurveLends: a weighted schedule lends a ramping endpoint its
// opening's calls while the time into its ramp is within half its
// factor's share of openingHorizon, and never before the ramp began.
func TestCurveLends(t *testing.T) {
	r := New(&lbconfig.SlowStartConfig{Enabled: true, Window: lbconfig.Duration(10 * time.Second), Aggression: 1, MinWeightPercent: 10})
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		elapsed int64
		want    bool
	}{{-1, false}, {0, true}, {5 * ms, true}, {5*ms + 1, false}, {time.Second.Nanoseconds(), false}} {
		if got := r.Lends(tc.elapsed); got != tc.want {
			t.Errorf("Lends(%v) = %v, want %v", time.Duration(tc.elapsed), got, tc.want)
		}
	}
}
