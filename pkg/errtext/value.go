package errtext

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxValue is the most of one value a message shows.
const MaxValue = 200

// MaxMessage is the most of a message made elsewhere (Message) shown.
const MaxMessage = 2048

// maxRun is the longest run without a space Message keeps: a value Value
// cut already ("aaa…(1048576 bytes)") is not cut again.
const maxRun = MaxValue + 32

// Value is s as a message may show it: whole when it is at most MaxValue
// bytes, else its first MaxValue bytes and its length, e.g.
// "aaaa…(104857600 bytes)". A value given by an operator can be a whole
// file's worth.
func Value(s string) string {
	if len(s) <= MaxValue {
		return s
	}
	return fmt.Sprintf("%s(%d bytes)", Truncate(s, MaxValue), len(s))
}

// Values shortens the arguments of a format as Value does: strings (and
// types whose kind is string), errors and Stringers. Other arguments
// (numbers, durations, file modes) are kept as they are.
func Values(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch x := a.(type) {
		case nil:
			out[i] = a
		case string:
			out[i] = Value(x)
		case error:
			out[i] = Message(x.Error())
		default:
			if v := reflect.ValueOf(a); v.Kind() == reflect.String {
				out[i] = Value(v.String())
			} else {
				out[i] = a
			}
		}
	}
	return out
}

// Message shortens a message that may quote an over-long value it was
// not made to cut: every run of text without a space much longer than
// MaxValue is cut as Value cuts a value, and a message still longer than
// MaxMessage keeps its start and its end (where the fix is), saying how
// much was left out between them.
func Message(msg string) string {
	if len(msg) <= MaxValue {
		return msg
	}
	var b strings.Builder
	for rest := msg; rest != ""; {
		i := strings.IndexFunc(rest, unicode.IsSpace)
		if i < 0 {
			i = len(rest)
		}
		if run := rest[:i]; len(run) > maxRun {
			b.WriteString(Value(run))
		} else {
			b.WriteString(run)
		}
		rest = rest[i:]
		j := strings.IndexFunc(rest, func(r rune) bool { return !unicode.IsSpace(r) })
		if j < 0 {
			j = len(rest)
		}
		b.WriteString(rest[:j])
		rest = rest[j:]
	}
	s := b.String()
	if len(s) <= MaxMessage {
		return s
	}
	half := MaxMessage / 2
	head, tail := half, len(s)-half
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:head] + "…(" + strconv.Itoa(tail-head) + " bytes left out)…" + s[tail:]
}

// Arg is s as an argument in a command a message suggests: as it is when
// it is plain (letters, digits and -._/:=@+,), else quoted, so that a line
// break or a space in it cannot break the message or the command.
func Arg(s string) string {
	s = Value(s)
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if !(r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-._/:=@+,", r))) {
			return strconv.Quote(s)
		}
	}
	return s
}

// Show is a setting's value as a message may show it: a scalar as Value
// shows it, a map or a list (a YAML value where one value was expected)
// named as such with its content as JSON, e.g. `a map ({"a":"1"})`, never
// as Go prints it (map[a:1]).
func Show(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing"
	case string:
		return Value(x)
	case map[string]any, map[any]any, []any, []string, map[string]string:
		kind := "a list"
		if reflect.ValueOf(x).Kind() == reflect.Map {
			kind = "a map"
		}
		b, err := json.Marshal(x)
		if err != nil {
			return kind
		}
		return kind + " (" + Value(string(b)) + ")"
	}
	return Value(fmt.Sprint(v))
}

// OneLine escapes control characters (a line break, a tab, an escape
// sequence) as Go writes them in a quoted string, e.g. \n: a value quoted
// without %q cannot break a message over lines, nor hide part of it on a
// terminal. Text without any is returned as it is.
func OneLine(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// isControl: C0, DEL and C1 (ESC starts a terminal's escape sequence),
// the line and paragraph separators, and the bidi embeddings, overrides
// and isolates, which reorder what a reader sees.
func isControl(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' ||
		r >= '\u202a' && r <= '\u202e' || r >= '\u2066' && r <= '\u2069'
}

// MaxOutbound is the most of one text from elsewhere the agent passes on.
const MaxOutbound = 1024

// Outbound is text the agent did not write (a control plane's message, an
// error that quotes one) as it may leave the agent: in systemd's STATUS=,
// /ready, /status and the status command. Control characters are escaped
// visibly (OneLine), bytes that are not UTF-8 become U+FFFD, and the text
// is cut to MaxOutbound bytes: it can neither add a line to a line-based
// protocol nor drive or reorder a terminal.
func Outbound(s string) string {
	return Truncate(OneLine(strings.ToValidUTF8(s, "\uFFFD")), MaxOutbound)
}
