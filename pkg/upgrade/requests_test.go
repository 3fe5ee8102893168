package upgrade

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// POST /envoy/handover asks the serve loop and answers with its outcome;
// another method is refused, and asking gives up when the asker does.
func TestAHandoverIsAskedOfTheServeLoop(t *testing.T) {
	var q Requests
	go func() {
		for req := range q.C() {
			if req.Reason == "fail" {
				req.Answer(errors.New("the new Envoy exited"))
				continue
			}
			req.Answer(nil)
		}
	}()
	reason := "asked"
	h := Handler(time.Minute, func(ctx context.Context) error { return q.Ask(ctx, reason, nil) }, func() string { return "generation 2 serves" })
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tc := range []struct {
		method, reason string
		code           int
		says           string
	}{
		{http.MethodPost, "asked", http.StatusOK, "generation 2 serves\n"},
		{http.MethodPost, "fail", http.StatusConflict, "the new Envoy exited\n"},
		{http.MethodGet, "asked", http.StatusMethodNotAllowed, "method not allowed: POST /envoy/handover\n"},
	} {
		reason = tc.reason
		req, _ := http.NewRequest(tc.method, srv.URL+"/envoy/handover", nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || string(body) != tc.says {
			t.Errorf("%s (%s): %d %q, want %d %q", tc.method, tc.reason, resp.StatusCode, body, tc.code, tc.says)
		}
	}
	var idle Requests // no serve loop takes it up
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := idle.Ask(ctx, "asked", nil); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("asking nobody: %v", err)
	}
}
