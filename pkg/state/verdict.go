package state

import "time"

// EnvoyHealth is one answer of Envoy's admin /ready, as the prober
// publishes it about once a second.
type EnvoyHealth struct {
	// Probed: a prober watches Envoy. False until Envoy first starts.
	Probed bool
	// Word is Envoy's state word (LIVE, INITIALIZING, DRAINING, …); empty
	// when Envoy did not answer.
	Word string
	// Live: Envoy answered 200 LIVE.
	Live bool
	// Err says why Envoy's admin API did not answer; empty when it did.
	Err string
	// At is when the question was asked.
	At time.Time
}

// sameAnswer: h and o differ at most in when they were asked.
func (h EnvoyHealth) sameAnswer(o EnvoyHealth) bool {
	return h.Probed == o.Probed && h.Word == o.Word && h.Live == o.Live && h.Err == o.Err
}

// Verdict is what every observer says of the agent: /ready's status and
// words, the ready and phase metrics, systemd's STATUS= line.
type Verdict struct {
	// Word is /ready's first line: the phase (READY, WAITING_FOR_MESH, …)
	// or, while the phase is READY and Envoy is not live, ENVOY_<state>,
	// ENVOY_UNREACHABLE or ENVOY_STARTING.
	Word string
	// Ready: 200 READY.
	Ready bool
	// Detail is the reason, for people: the phase's detail, or what Envoy
	// answered.
	Detail string
}

// Envoy's words in a verdict while the phase is READY.
const (
	EnvoyUnreachableWord = "ENVOY_UNREACHABLE"
	envoyWordPrefix      = "ENVOY_"
)

// EnvoyUnreachable says why Envoy's admin API does not answer, when its
// last answer, asked for in the current phase, was none. An answer asked
// for before the phase began is stale: the agent entered the phase on a
// newer answer of its own (READY follows Envoy's LIVE).
func (s Snapshot) EnvoyUnreachable() (string, bool) {
	h := s.Envoy
	if !h.Probed || h.Err == "" || h.At.Before(s.Since) {
		return "", false
	}
	return "Envoy's admin API does not answer /ready: " + h.Err, true
}

// Verdict is the agent's phase, corrected by what Envoy last answered
// while the phase says READY. With no answer asked for in the phase (no
// prober, or none since READY began) the phase stands: the agent enters
// READY on Envoy's LIVE. It never asks Envoy itself.
func (s Snapshot) Verdict() Verdict {
	if s.Phase != Ready {
		return Verdict{Word: string(s.Phase), Detail: s.Detail}
	}
	h := s.Envoy
	if why, down := s.EnvoyUnreachable(); down {
		return Verdict{Word: EnvoyUnreachableWord, Detail: why}
	}
	if h.Probed && !h.Live && !h.At.Before(s.Since) {
		word := h.Word
		if word == "" {
			word = "NOT_LIVE" // an answer other than 200 with no state word
		}
		return Verdict{Word: envoyWordPrefix + word, Detail: "Envoy reports " + word + ", not LIVE"}
	}
	return Verdict{Word: string(Ready), Ready: true, Detail: s.Detail}
}
