package lbconfig_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pickwise/pickwise/balancer/orcawrr"
	"github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/balancer/peakewma"
	"github.com/pickwise/pickwise/balancer/prequal"
	"github.com/pickwise/pickwise/balancer/ringhash"
	"github.com/pickwise/pickwise/balancer/shadow"
	"github.com/pickwise/pickwise/balancer/subset"
	"github.com/pickwise/pickwise/lbconfig"
	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// TestPolicyPackages checks lbconfig's table of policy names and the
// packages that register them against the packages themselves: each
// one's Name, its import path, and that the import registers it. Every
// package under balancer/ must be in it, so a new policy cannot be left
// out.
func TestPolicyPackages(t *testing.T) {
	want := map[string]string{}
	for _, p := range []struct {
		name string
		typ  reflect.Type // any type of the package, for its path
	}{
		{orcawrr.Name, reflect.TypeFor[orcawrr.Config]()},
		{p2c.Name, reflect.TypeFor[p2c.Config]()},
		{peakewma.Name, reflect.TypeFor[peakewma.Config]()},
		{prequal.Name, reflect.TypeFor[prequal.Config]()},
		{ringhash.Name, reflect.TypeFor[ringhash.Config]()},
		{shadow.Name, reflect.TypeFor[shadow.Config]()},
		{subset.Name, reflect.TypeFor[subset.Config]()},
	} {
		want[p.name] = p.typ.PkgPath()
		if balancer.Get(p.name) == nil {
			t.Errorf("%s is not registered by importing %s", p.name, p.typ.PkgPath())
		}
	}
	if d := cmp.Diff(want, lbconfig.PolicyPackages()); d != "" {
		t.Errorf("lbconfig's policy table differs from the packages (-packages +table):\n%s", d)
	}
	dirs, err := os.ReadDir(filepath.Join("..", "balancer"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, pkg := range want {
		listed[pkg] = true
	}
	for _, d := range dirs {
		if pkg := "github.com/pickwise/pickwise/balancer/" + d.Name(); d.IsDir() && !listed[pkg] {
			t.Errorf("%s is not in lbconfig's policy table nor in this test", pkg)
		}
	}
}

// TestServiceConfigNotRegistered: with every pickwise policy imported, a
// name no package registered is an error that points at the name meant;
// grpc's own policies pass.
func TestServiceConfigNotRegistered(t *testing.T) {
	for _, tc := range []struct {
		policy  string
		wantErr string // "" for none
	}{
		{"pickwise_p2", `lbconfig: policy "pickwise_p2" is not registered; did you mean "pickwise_p2c"?`},
		{"pickwise_ring_hsah", `lbconfig: policy "pickwise_ring_hsah" is not registered; did you mean "pickwise_ring_hash"?`},
		{"prequal", `lbconfig: policy "prequal" is not registered; did you mean "pickwise_prequal"?`},
		{"my_policy", `lbconfig: policy "my_policy" is not registered: no package this program imports registers it with grpc`},
		{"round_robin", ""},
		{"pick_first", ""},
		{"pickwise_p2c", ""},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			sc, err := lbconfig.ServiceConfig(tc.policy, struct{}{})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("ServiceConfig(%q) = %v, want no error", tc.policy, err)
			case tc.wantErr == "" && sc != `{"loadBalancingConfig":[{"`+tc.policy+`":{}}]}`:
				t.Errorf("ServiceConfig(%q) = %s", tc.policy, sc)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("ServiceConfig(%q) = %q, %v\nwant error %s", tc.policy, sc, err, tc.wantErr)
			}
		})
	}
}

// TestGrpcSkipsUnregisteredPolicies pins what docs/README say grpc does
// with a policy name that is not registered: in a list with a registered
// entry after it, or in the older loadBalancingPolicy field, the channel
// is created without an error; alone in a list, a default service config
// is rejected when the channel is created, and a resolver's leaves the
// channel failing its calls.
func TestGrpcSkipsUnregisteredPolicies(t *testing.T) {
	dial := func(sc string) error {
		conn, err := grpc.NewClient("passthrough:///unused", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(sc))
		if err == nil {
			conn.Close()
		}
		return err
	}
	if err := dial(`{"loadBalancingConfig": [{"pickwise_p2": {}}, {"round_robin": {}}]}`); err != nil {
		t.Errorf("a list with a registered entry after the typo: %v, want grpc to take round_robin silently", err)
	}
	if err := dial(`{"loadBalancingPolicy": "pickwise_p2"}`); err != nil {
		t.Errorf("the older loadBalancingPolicy field with the typo: %v, want grpc to take pick_first silently", err)
	}
	err := dial(`{"loadBalancingConfig": [{"pickwise_p2": {}}]}`)
	if err == nil || !strings.Contains(err.Error(), "no supported policies found") {
		t.Errorf("a list of one unregistered name: %v, want grpc's no supported policies error", err)
	}

	// From the resolver, with no config accepted before, the channel
	// fails its calls.
	r := manual.NewBuilderWithScheme("lbconfig")
	conn, err := grpc.NewClient("lbconfig:///unused", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(r))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Connect() // builds the resolver
	r.UpdateState(resolver.State{
		Addresses:     []resolver.Address{{Addr: "127.0.0.1:1"}},
		ServiceConfig: r.CC().ParseServiceConfig(`{"loadBalancingConfig": [{"pickwise_p2": {}}]}`),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = conn.Invoke(ctx, "/lbconfig.Test/Call", &emptypb.Empty{}, &emptypb.Empty{})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "error parsing service config") {
		t.Errorf("a call under a resolver's config of one unregistered name: %v, want UNAVAILABLE, error parsing service config", err)
	}
}
