package controlplane

import (
	"io"
	"net/http"
)

// registerPolicyAdmin adds the policy endpoints to the admin API:
//
//	GET    /proxies/{mesh}/{name}/policies
//	PUT    /proxies/{mesh}/{name}/meshaccesslogs/{policy}   MeshAccessLog `default`
//	DELETE /proxies/{mesh}/{name}/meshaccesslogs/{policy}
//	PUT    /proxies/{mesh}/{name}/meshmetrics/{policy}      MeshMetric `default`
//	DELETE /proxies/{mesh}/{name}/meshmetrics/{policy}
//	PUT    /proxies/{mesh}/{name}/zone-listeners            {"withheld": true|false}
//
// Each answers with the proxy's ProxyPolicies after the change.
func (s *Server) registerPolicyAdmin(mux *http.ServeMux) {
	mux.HandleFunc("GET /proxies/{mesh}/{name}/policies", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.PoliciesFor(r.PathValue("mesh"), r.PathValue("name")))
	})
	mux.HandleFunc("PUT /proxies/{mesh}/{name}/meshaccesslogs/{policy}", func(w http.ResponseWriter, r *http.Request) {
		var m MeshAccessLog
		if !readPolicy(w, r, &m) {
			return
		}
		s.answerPolicyChange(w, r, s.SetMeshAccessLog(r.PathValue("mesh"), r.PathValue("name"), r.PathValue("policy"), m))
	})
	mux.HandleFunc("DELETE /proxies/{mesh}/{name}/meshaccesslogs/{policy}", func(w http.ResponseWriter, r *http.Request) {
		if !s.DeleteMeshAccessLog(r.PathValue("mesh"), r.PathValue("name"), r.PathValue("policy")) {
			writeText(w, http.StatusNotFound, "no MeshAccessLog "+r.PathValue("policy")+" on this proxy")
			return
		}
		s.answerPolicyChange(w, r, nil)
	})
	mux.HandleFunc("PUT /proxies/{mesh}/{name}/meshmetrics/{policy}", func(w http.ResponseWriter, r *http.Request) {
		var m MeshMetric
		if !readPolicy(w, r, &m) {
			return
		}
		s.answerPolicyChange(w, r, s.SetMeshMetric(r.PathValue("mesh"), r.PathValue("name"), r.PathValue("policy"), m))
	})
	mux.HandleFunc("DELETE /proxies/{mesh}/{name}/meshmetrics/{policy}", func(w http.ResponseWriter, r *http.Request) {
		if !s.DeleteMeshMetric(r.PathValue("mesh"), r.PathValue("name"), r.PathValue("policy")) {
			writeText(w, http.StatusNotFound, "no MeshMetric "+r.PathValue("policy")+" on this proxy")
			return
		}
		s.answerPolicyChange(w, r, nil)
	})
	mux.HandleFunc("PUT /proxies/{mesh}/{name}/zone-listeners", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Withheld *bool `json:"withheld"`
		}
		if !readPolicy(w, r, &body) {
			return
		}
		if body.Withheld == nil {
			writeText(w, http.StatusBadRequest, `withheld: required, true or false`)
			return
		}
		s.answerPolicyChange(w, r, s.WithholdZoneListeners(r.PathValue("mesh"), r.PathValue("name"), *body.Withheld))
	})
}

// readPolicy decodes the body strictly; false means it already answered 400.
func readPolicy(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = decodeStrict(body, v)
	}
	if err != nil {
		writeText(w, http.StatusBadRequest, "invalid JSON: "+err.Error())
		return false
	}
	return true
}

func (s *Server) answerPolicyChange(w http.ResponseWriter, r *http.Request, err error) {
	if err != nil {
		writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, s.PoliciesFor(r.PathValue("mesh"), r.PathValue("name")))
}
