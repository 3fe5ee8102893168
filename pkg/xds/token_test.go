package xds

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestTokenReadForEachStream(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	exp := time.Unix(1900000000, 0)
	jwt := enc(exp)
	tests := []struct {
		name   string
		tok    *Token
		want   string
		expiry time.Time
		err    string
	}{
		{name: "inline, trimmed", tok: &Token{Inline: " opaque\n"}, want: "opaque"},
		{name: "a file, trimmed, its expiry told", tok: &Token{File: file("jwt", jwt+"\n")}, want: jwt, expiry: exp},
		{name: "the file wins over the inline token", tok: &Token{Inline: "old", File: file("new", "new")}, want: "new"},
		{name: "an empty file is being rotated", tok: &Token{File: file("empty", "")}, err: "is empty (is it being rotated?)"},
		{name: "a missing file is being rotated", tok: &Token{File: filepath.Join(dir, "gone")}, err: "cannot read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			told := time.Unix(1, 0)
			tt.tok.Expiry = func(at time.Time) { told = at }
			got, err := tt.tok.Read()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || tt.tok.Last() != "" {
					t.Fatalf("%q, %v; want %q and no token kept", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want || tt.tok.Last() != tt.want {
				t.Fatalf("%q (last %q), %v; want %q", got, tt.tok.Last(), err, tt.want)
			}
			if !told.Equal(tt.expiry) {
				t.Errorf("expiry told %v, want %v", told, tt.expiry)
			}
		})
	}
}

// enc is an unsigned JWT whose exp is at.
func enc(at time.Time) string {
	b := base64.RawURLEncoding.EncodeToString
	return b([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + b([]byte(`{"exp":`+strconv.FormatInt(at.Unix(), 10)+`}`)) + ".sig"
}
