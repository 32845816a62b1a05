// Package loadpb is the probe service of pickwise_prequal, generated from
// load.proto by scripts/genproto: servers answer it through serverload,
// clients ask it from balancer/prequal.
package loadpb
