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
	policyAdmin(s, mux, "meshaccesslogs", "MeshAccessLog", s.SetMeshAccessLog, s.DeleteMeshAccessLog)
	policyAdmin(s, mux, "meshmetrics", "MeshMetric", s.SetMeshMetric, s.DeleteMeshMetric)
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

// policyAdmin adds PUT and DELETE /proxies/{mesh}/{name}/<path>/{policy}
// for one policy kind.
func policyAdmin[P any](s *Server, mux *http.ServeMux, path, kind string, set func(mesh, name, policy string, p P) error, del func(mesh, name, policy string) bool) {
	route := "/proxies/{mesh}/{name}/" + path + "/{policy}"
	mux.HandleFunc("PUT "+route, func(w http.ResponseWriter, r *http.Request) {
		var p P
		if !readPolicy(w, r, &p) {
			return
		}
		s.answerPolicyChange(w, r, set(r.PathValue("mesh"), r.PathValue("name"), r.PathValue("policy"), p))
	})
	mux.HandleFunc("DELETE "+route, func(w http.ResponseWriter, r *http.Request) {
		if !del(r.PathValue("mesh"), r.PathValue("name"), r.PathValue("policy")) {
			writeText(w, http.StatusNotFound, "no "+kind+" "+r.PathValue("policy")+" on this proxy")
			return
		}
		s.answerPolicyChange(w, r, nil)
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
