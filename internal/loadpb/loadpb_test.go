package loadpb

import (
	"fmt"
	"os"
	"regexp"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestDescriptor: the committed generated code carries the service, the
// method and the fields the clients and servers of other versions expect.
// A change to load.proto without scripts/genproto, or the other way
// round, shows here.
func TestDescriptor(t *testing.T) {
	if got, want := LoadProbe_Probe_FullMethodName, "/pickwise.serverload.v1.LoadProbe/Probe"; got != want {
		t.Errorf("full method name = %q, want %q", got, want)
	}
	fd := File_internal_loadpb_load_proto
	if got, want := fd.Path(), "internal/loadpb/load.proto"; got != want {
		t.Errorf("file registered as %q, want %q", got, want)
	}
	svc := fd.Services().ByName("LoadProbe")
	if svc == nil || svc.FullName() != "pickwise.serverload.v1.LoadProbe" {
		t.Fatalf("service LoadProbe not found in %s", fd.Package())
	}
	m := svc.Methods().ByName("Probe")
	if m == nil || m.Input().FullName() != "pickwise.serverload.v1.ProbeRequest" ||
		m.Output().FullName() != "pickwise.serverload.v1.ProbeResponse" || m.IsStreamingClient() || m.IsStreamingServer() {
		t.Fatalf("method Probe = %v, want unary ProbeRequest -> ProbeResponse", m)
	}
	if n := (&ProbeRequest{}).ProtoReflect().Descriptor().Fields().Len(); n != 0 {
		t.Errorf("ProbeRequest has %d fields, want none", n)
	}
	fields := (&ProbeResponse{}).ProtoReflect().Descriptor().Fields()
	for _, want := range []struct {
		name string
		num  protoreflect.FieldNumber
		kind protoreflect.Kind
	}{
		{"requests_in_flight", 1, protoreflect.Uint32Kind},
		{"latency_nanos", 2, protoreflect.Int64Kind},
	} {
		f := fields.ByName(protoreflect.Name(want.name))
		if f == nil || f.Number() != want.num || f.Kind() != want.kind {
			t.Errorf("ProbeResponse.%s = %v, want field %d of kind %v", want.name, f, want.num, want.kind)
		}
	}
	if fields.Len() != 2 {
		t.Errorf("ProbeResponse has %d fields, want 2", fields.Len())
	}
}

// TestMatchesProto: every field and rpc declared in load.proto is in the
// generated descriptor, with the same number, kind and messages. It reads
// the .proto with a pattern, not a parser: the file is small and plain.
func TestMatchesProto(t *testing.T) {
	src, err := os.ReadFile("load.proto")
	if err != nil {
		t.Fatal(err)
	}
	fd := File_internal_loadpb_load_proto
	if pkg := regexp.MustCompile(`(?m)^package ([\w.]+);`).FindSubmatch(src); pkg == nil || string(pkg[1]) != string(fd.Package()) {
		t.Errorf("load.proto's package %q, generated %q", pkg, fd.Package())
	}
	msgs := regexp.MustCompile(`(?s)message (\w+) \{(.*?)\n?\}`).FindAllSubmatch(src, -1)
	if len(msgs) != fd.Messages().Len() {
		t.Errorf("load.proto declares %d messages, generated %d", len(msgs), fd.Messages().Len())
	}
	field := regexp.MustCompile(`(?m)^\s*(\w+) (\w+) = (\d+);`)
	for _, m := range msgs {
		md := fd.Messages().ByName(protoreflect.Name(m[1]))
		if md == nil {
			t.Errorf("message %s not generated", m[1])
			continue
		}
		decl := field.FindAllSubmatch(m[2], -1)
		if len(decl) != md.Fields().Len() {
			t.Errorf("%s: %d fields in load.proto, %d generated", m[1], len(decl), md.Fields().Len())
		}
		for _, f := range decl {
			fdesc := md.Fields().ByName(protoreflect.Name(f[2]))
			if fdesc == nil || fmt.Sprint(fdesc.Number()) != string(f[3]) || fdesc.Kind().String() != string(f[1]) {
				t.Errorf("%s.%s: load.proto says %s = %s, generated %v", m[1], f[2], f[1], f[3], fdesc)
			}
		}
	}
	rpcs := regexp.MustCompile(`rpc (\w+)\((\w+)\) returns \((\w+)\);`).FindAllSubmatch(src, -1)
	methods := fd.Services().ByName("LoadProbe").Methods()
	if len(rpcs) != methods.Len() {
		t.Errorf("load.proto declares %d rpcs, generated %d", len(rpcs), methods.Len())
	}
	for _, r := range rpcs {
		m := methods.ByName(protoreflect.Name(r[1]))
		if m == nil || string(m.Input().Name()) != string(r[2]) || string(m.Output().Name()) != string(r[3]) {
			t.Errorf("rpc %s(%s) returns (%s): generated %v", r[1], r[2], r[3], m)
		}
	}
}
