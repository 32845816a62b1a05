package sim

import "testing"

func TestBlackHole(t *testing.T) {
	r, err := BlackHole(testScale())
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.Table.String())
	share := map[string]float64{}
	for i, p := range r.Policies {
		share[p] = r.Share[i]
		if d := r.ErrorRate[i] - r.Share[i]; d > 0.005 || d < -0.005 {
			t.Errorf("%s: error rate %.3f differs from the broken backend's share %.3f; only it fails", p, r.ErrorRate[i], r.Share[i])
		}
	}
	// Placement that ignores load gives the broken backend its fair share.
	for _, p := range []string{"random", "round_robin"} {
		if s := share[p]; s < 0.08 || s > 0.12 {
			t.Errorf("%s: broken backend share %.3f, want about 0.10", p, s)
		}
	}
	// Two random choices: about 1-(9/10)^2 = 19%.
	if s := share["least_request"]; s < 0.16 || s > 0.22 {
		t.Errorf("least_request: broken backend share %.3f, want about 0.19", s)
	}
	// A full scan finds the always-idle broken backend almost every time.
	if s := share["least-conn (full scan)"]; s < 0.5 {
		t.Errorf("least-conn: broken backend share %.3f, want above 0.5", s)
	}
	if s := share["pickwise_p2c"]; s > 0.02 {
		t.Errorf("pickwise_p2c: broken backend share %.3f, want at most 0.02", s)
	}
	// Peak EWMA records each failure as a sample slower than any success
	// and applies the failure penalty on top: a 1 ms failure never looks
	// fast.
	if s, ok := share["pickwise_peak_ewma"]; !ok {
		t.Errorf("no pickwise_peak_ewma column in %q", r.Policies)
	} else if s >= 0.02 {
		t.Errorf("pickwise_peak_ewma: broken backend share %.3f, want below 0.02", s)
	}
}

func TestBlackHoleDeterministic(t *testing.T) {
	a, err := BlackHole(Reduced)
	if err != nil {
		t.Fatal(err)
	}
	b, err := BlackHole(Reduced)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range a.Policies {
		switch p {
		case "pickwise_p2c", "pickwise_peak_ewma", "random", "least-conn (full scan)":
			if a.Share[i] != b.Share[i] {
				t.Errorf("%s: two runs with the same seed gave %v and %v", p, a.Share[i], b.Share[i])
			}
		}
	}
}
