package dataplane

import "testing"

// The agent renders once per start; these bound that cost and catch a
// change that makes rendering allocate far more than it needs to.

func BenchmarkRender(b *testing.B) {
	s := spec(10001, 10002)
	b.ReportAllocs()
	for b.Loop() {
		_ = Render(s)
	}
}

// JSON is the dataplaneResource string in every /bootstrap request.
func BenchmarkRenderJSON(b *testing.B) {
	s := spec(10001, 10002)
	b.ReportAllocs()
	for b.Loop() {
		_ = Render(s).JSON()
	}
}

func BenchmarkRenderYAML(b *testing.B) {
	dp := Render(spec(10001, 10002))
	b.ReportAllocs()
	for b.Loop() {
		_ = dp.YAML()
	}
}

func BenchmarkValidate(b *testing.B) {
	dp := Render(spec(10001, 10002))
	b.ReportAllocs()
	for b.Loop() {
		if errs := append(dp.ValidateMeta(), dp.Validate()...); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

func BenchmarkSanitizeName(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = SanitizeName("zone-proxy-payments-egress-Web_Host.01.example.internal")
	}
}
