package main

import "testing"

// Envoy serves in /server_info the string --version prints, so a replaced
// --version answer is what the running stand-in reports too.
func TestReportedBuildFollowsTheVersionOutput(t *testing.T) {
	other := "0123456789abcdef0123456789abcdef01234567/1.38.4/Clean/RELEASE/BoringSSL"
	for _, tc := range []struct {
		name   string
		output *string
		want   string
	}{
		{"its own", nil, envoyBuild},
		{"replaced", ptr("\nenvoy  version: " + other + "\n\n"), other},
		{"not a version line", ptr("garbage\n"), envoyBuild},
		{"empty build", ptr("envoy  version: \n"), envoyBuild},
	} {
		if got := (&hooks{versionOutput: tc.output}).build(); got != tc.want {
			t.Errorf("%s: build %q; want %q", tc.name, got, tc.want)
		}
	}
}

func ptr(s string) *string { return &s }
