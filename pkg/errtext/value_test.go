package errtext

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

type role string

func TestValueShowsAnOverLongValueCut(t *testing.T) {
	huge := strings.Repeat("a", 100<<20)
	cases := []struct {
		name, in, want string
	}{
		{"short", "payments", "payments"},
		{"exactly the limit", strings.Repeat("b", MaxValue), strings.Repeat("b", MaxValue)},
		{"one byte over", strings.Repeat("b", MaxValue+1), strings.Repeat("b", MaxValue) + "…(201 bytes)"},
		{"100 MB", huge, strings.Repeat("a", MaxValue) + "…(104857600 bytes)"},
		{"never inside a rune", strings.Repeat("é", MaxValue), strings.Repeat("é", MaxValue/2) + "…(400 bytes)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Value(tc.in); got != tc.want {
				t.Errorf("Value = %.300q, want %.300q", got, tc.want)
			}
		})
	}
}

func TestValuesCutsStringsAndErrorsOnly(t *testing.T) {
	long := strings.Repeat("x", 1000)
	got := Values([]any{long, role(long), errors.New("bad " + long), 42, 3 * time.Second, nil})
	for i := range 3 {
		if s := fmt.Sprint(got[i]); len(s) > MaxValue+30 || !strings.Contains(s, "(1000 bytes)") {
			t.Errorf("argument %d not cut: %.300q", i, s)
		}
	}
	if got[3] != 42 || got[4] != 3*time.Second || got[5] != nil {
		t.Errorf("other arguments changed: %v", got[3:])
	}
}

func TestMessageCutsWhatItWasNotMadeToCut(t *testing.T) {
	long := strings.Repeat("a", 10<<20)
	spaced := strings.Repeat("a ", 5<<20)
	cases := []struct {
		name, in   string
		has, lacks []string
	}{
		{"short message", "--mesh: required", []string{"--mesh: required"}, nil},
		{"a long word", "--ingress-port: " + long + " is not a whole number",
			[]string{"--ingress-port: " + strings.Repeat("a", MaxValue) + "…(10485760 bytes) is not a whole number"}, nil},
		{"a long value with spaces keeps its start and its fix", "--name: invalid name \"" + spaced + "\": must be a lowercase RFC 1123 subdomain",
			[]string{"--name: invalid name \"a a", "bytes left out)…", "must be a lowercase RFC 1123 subdomain"}, nil},
		{"long but fine", strings.Repeat("word ", 60), []string{strings.Repeat("word ", 60)}, []string{"…"}},
		{"a value cut already", "--drain-time: \"" + Value(long) + "\" is not a duration", []string{"--drain-time: \"" + Value(long) + "\" is not a duration"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Message(tc.in)
			if len(got) > MaxMessage+100 {
				t.Fatalf("%d bytes", len(got))
			}
			for _, w := range tc.has {
				if !strings.Contains(got, w) {
					t.Errorf("%.400q lacks %.300q", got, w)
				}
			}
			for _, w := range tc.lacks {
				if strings.Contains(got, w) {
					t.Errorf("%.400q has %q", got, w)
				}
			}
		})
	}
}

func TestArgNeverBreaksACommand(t *testing.T) {
	cases := []struct{ in, want string }{
		{"payments", "payments"},
		{"zone-proxy-payments-egress", "zone-proxy-payments-egress"},
		{"kuma.io/service", "kuma.io/service"},
		{"pay\nments", `"pay\nments"`},
		{"two words", `"two words"`},
		{"", `""`},
		{"$(reboot)", `"$(reboot)"`},
	}
	for _, tc := range cases {
		if got := Arg(tc.in); got != tc.want {
			t.Errorf("Arg(%q) = %s, want %s", tc.in, got, tc.want)
		}
		if strings.ContainsAny(Arg(tc.in), "\n\r") {
			t.Errorf("Arg(%q) has a line break", tc.in)
		}
	}
}

func TestShowNamesMapsAndLists(t *testing.T) {
	cases := []struct {
		name string
		in   any
		want string
	}{
		{"text", "30s", "30s"},
		{"a map", map[string]any{"a": "1"}, `a map ({"a":"1"})`},
		{"a list", []any{"x", "y"}, `a list (["x","y"])`},
		{"nothing", nil, "nothing"},
		{"a huge map", map[string]any{"a": strings.Repeat("v", 1000)}, "a map ({\"a\":\"" + strings.Repeat("v", MaxValue-6) + "…(1008 bytes))"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Show(tc.in)
			if got != tc.want {
				t.Errorf("Show = %q, want %q", got, tc.want)
			}
			if strings.Contains(got, "map[") {
				t.Errorf("Go's map syntax: %q", got)
			}
		})
	}
}

func TestOneLine(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain text", "plain text"},
		{"/tmp/to\nken does not exist", `/tmp/to\nken does not exist`},
		{"a\r\tb\x1b[2Jc", `a\r\tb\x1b[2Jc`},
		{"é and … stay", "é and … stay"},
		{"line\u2028separator", `line\u2028separator`},
	}
	for _, tc := range cases {
		if got := OneLine(tc.in); got != tc.want {
			t.Errorf("OneLine(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestOutboundCannotBreakALineOrDriveATerminal(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"plain", "kuma-cp: mesh default not found", "kuma-cp: mesh default not found"},
		{"a new assignment", "bad\nWATCHDOG=trigger", `bad\nWATCHDOG=trigger`},
		{"carriage return", "ok\rFAILED", `ok\rFAILED`},
		{"escape sequence", "\x1b[2Jcleared", `\x1b[2Jcleared`},
		{"C1 control", "a\u009bb", `a\u009bb`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"bidi override", "abc\u202edcba", `abc\u202edcba`},
		{"bidi isolate", "a\u2066b\u2069", `a\u2066b\u2069`},
		{"not UTF-8", "a\xffb", "a\uFFFDb"},
		{"long", strings.Repeat("x", 5000), strings.Repeat("x", MaxOutbound) + "…"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Outbound(tc.in); got != tc.want {
				t.Errorf("Outbound(%.80q) = %.80q, want %.80q", tc.in, got, tc.want)
			}
		})
	}
}
