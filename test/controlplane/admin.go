package controlplane

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"time"
)

// startAdmin serves the plain-HTTP admin API that mirrors the Server
// methods (for the demo, shell scripts and out-of-process harnesses).
func (s *Server) startAdmin() error {
	ln, err := net.Listen("tcp", s.opts.AdminAddr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /meshes/{name}", s.adminPutMesh)
	mux.HandleFunc("DELETE /meshes/{name}", s.adminDeleteMesh)
	mux.HandleFunc("GET /meshes", s.adminListMeshes)
	mux.HandleFunc("POST /tokens/dataplane", s.adminIssueToken)
	mux.HandleFunc("GET /proxies", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Proxies())
	})
	mux.HandleFunc("GET /faults", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.currentFaults())
	})
	mux.HandleFunc("PUT /faults", s.adminPutFaults)
	mux.HandleFunc("POST /restart", s.adminRestart)
	mux.HandleFunc("GET /bootstrap-requests", func(w http.ResponseWriter, r *http.Request) {
		recs := s.BootstrapRequests()
		writeJSON(w, http.StatusOK, struct {
			Count   int               `json:"count"`
			Dropped int               `json:"dropped"` // the oldest, no longer kept
			Records []BootstrapRecord `json:"records"`
		}{len(recs), s.DroppedBootstrapRequests(), recs})
	})
	mux.HandleFunc("GET /version", s.adminVersion)
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		writeText(w, http.StatusOK, "READY")
	})
	s.registerLifecycleAdmin(mux)
	s.registerPolicyAdmin(mux)
	s.registerMigrationAdmin(mux)
	s.adminListener = ln
	s.adminServer = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          log.New(s.log, "admin: ", 0),
	}
	go func() { _ = s.adminServer.Serve(ln) }()
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeText(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (s *Server) adminPutMesh(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	// Like kuma's REST API: a body, when given, must name the same mesh.
	if body, _ := io.ReadAll(r.Body); len(strings.TrimSpace(string(body))) > 0 {
		var m struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if err := json.Unmarshal(body, &m); err != nil {
			writeText(w, http.StatusBadRequest, "invalid JSON: "+err.Error())
			return
		}
		if m.Name != "" && m.Name != name {
			writeText(w, http.StatusBadRequest, "name from the URL has to be the same as in body")
			return
		}
		if m.Type != "" && m.Type != "Mesh" {
			writeText(w, http.StatusBadRequest, "type from the URL has to be the same as in body")
			return
		}
	}
	if s.createMesh(name) {
		writeJSON(w, http.StatusCreated, struct{}{})
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) adminDeleteMesh(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !s.deleteMesh(name) {
		writeJSON(w, http.StatusNotFound, map[string]any{"status": 404, "title": "Could not delete a resource", "detail": "Not found"})
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) adminListMeshes(w http.ResponseWriter, r *http.Request) {
	type mesh struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	items := []mesh{}
	for _, m := range s.meshNames() {
		items = append(items, mesh{"Mesh", m})
	}
	writeJSON(w, http.StatusOK, map[string]any{"total": len(items), "items": items, "next": nil})
}

func (s *Server) adminIssueToken(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Mesh     string              `json:"mesh"`
		Name     string              `json:"name"`
		Workload string              `json:"workload"`
		Tags     map[string][]string `json:"tags"`
		Type     string              `json:"type"`
		ValidFor string              `json:"validFor"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeText(w, http.StatusBadRequest, "invalid JSON: "+err.Error())
		return
	}
	var problems []string
	if body.Mesh == "" {
		problems = append(problems, "mesh: cannot be empty")
	}
	var validFor time.Duration
	if body.ValidFor != "" {
		d, err := time.ParseDuration(body.ValidFor)
		switch {
		case err != nil:
			problems = append(problems, "validFor: is invalid: "+err.Error())
		case d <= 0:
			problems = append(problems, "validFor: is invalid: must be positive")
		default:
			validFor = d
		}
	}
	if body.Type != "" && body.Type != "dataplane" {
		problems = append(problems, fmt.Sprintf("type: %s is not a valid proxy type", body.Type))
	}
	if len(problems) > 0 {
		writeText(w, http.StatusBadRequest, strings.Join(problems, "; "))
		return
	}
	tok, err := s.IssueToken(TokenRequest{Mesh: body.Mesh, Name: body.Name, Workload: body.Workload, Tags: body.Tags, ValidFor: validFor})
	if err != nil {
		writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, tok)
}

func (s *Server) adminPutFaults(w http.ResponseWriter, r *http.Request) {
	var f Faults
	if err := json.NewDecoder(r.Body).Decode(&f); err != nil {
		writeText(w, http.StatusBadRequest, "invalid faults: "+err.Error())
		return
	}
	s.SetFaults(f)
	writeJSON(w, http.StatusOK, s.currentFaults())
}

// adminRestart answers once the DP listener is back.
func (s *Server) adminRestart(w http.ResponseWriter, r *http.Request) {
	var down time.Duration
	if v := r.URL.Query().Get("down"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			writeText(w, http.StatusBadRequest, "down: is invalid: "+v)
			return
		}
		down = d
	}
	if err := s.Restart(down); err != nil {
		writeText(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"addr": s.Addr()})
}

// registerLifecycleAdmin serves the Dataplane store, the zone egress set
// and the stream state of nodes.
func (s *Server) registerLifecycleAdmin(mux *http.ServeMux) {
	mux.HandleFunc("GET /lifecycle", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Timings())
	})
	mux.HandleFunc("GET /meshes/{mesh}/dataplanes", func(w http.ResponseWriter, r *http.Request) {
		items := s.Dataplanes(r.PathValue("mesh"))
		writeJSON(w, http.StatusOK, map[string]any{"at": time.Now(), "total": len(items), "items": items})
	})
	mux.HandleFunc("GET /meshes/{mesh}/dataplanes/{name}", func(w http.ResponseWriter, r *http.Request) {
		rec, ok := s.Dataplane(r.PathValue("mesh"), r.PathValue("name"))
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]any{"status": 404, "title": "Could not retrieve a resource", "detail": "Not found"})
			return
		}
		writeJSON(w, http.StatusOK, rec)
	})
	mux.HandleFunc("GET /meshes/{mesh}/dataplanes/{name}/timeline", func(w http.ResponseWriter, r *http.Request) {
		mesh, name := r.PathValue("mesh"), r.PathValue("name")
		_, present := s.Dataplane(mesh, name)
		writeJSON(w, http.StatusOK, map[string]any{
			"at": time.Now(), "mesh": mesh, "name": name, "present": present,
			"events": s.DataplaneTimeline(mesh, name),
		})
	})
	mux.HandleFunc("GET /meshes/{mesh}/zone-egresses", func(w http.ResponseWriter, r *http.Request) {
		mesh := r.PathValue("mesh")
		now := time.Now()
		writeJSON(w, http.StatusOK, map[string]any{
			"at":                now,
			"asOf":              now.Add(-s.timings.EgressPropagation),
			"egressPropagation": s.timings.EgressPropagation.String(),
			"mesh":              mesh,
			"handedOut":         s.ZoneEgressesAt(mesh, now),
			"raw":               s.StoredZoneEgresses(mesh),
		})
	})
	mux.HandleFunc("GET /meshes/{mesh}/zone-egresses/timeline", func(w http.ResponseWriter, r *http.Request) {
		mesh := r.PathValue("mesh")
		writeJSON(w, http.StatusOK, map[string]any{
			"at":                time.Now(),
			"egressPropagation": s.timings.EgressPropagation.String(),
			"mesh":              mesh,
			"changes":           s.ZoneEgressTimeline(mesh),
		})
	})
	mux.HandleFunc("GET /nodes/{nodeId}/stream", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.NodeStream(r.PathValue("nodeId")))
	})
}
