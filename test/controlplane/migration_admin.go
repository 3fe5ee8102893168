package controlplane

import (
	"io"
	"net/http"
)

// registerMigrationAdmin serves migration.go's resources and SidecarView:
//
//	PUT    /zone-ingresses/{name}                   {"zone","address","port"}
//	DELETE /zone-ingresses/{name}
//	PUT    /zone-egresses/{name}                    {"address","port"}
//	DELETE /zone-egresses/{name}
//	PUT    /meshes/{mesh}/meshidentity              (no body) / DELETE
//	PUT    /meshes/{mesh}/meshzoneaddresses/{name}  {"zone","address","port"}
//	DELETE /meshes/{mesh}/meshzoneaddresses/{name}
//	PUT    /meshes/{mesh}/meshservice-port          {"named": true|false}
//	GET    /meshes/{mesh}/sidecar?zone=default      SidecarView
func (s *Server) registerMigrationAdmin(mux *http.ServeMux) {
	mux.HandleFunc("PUT /zone-ingresses/{name}", func(w http.ResponseWriter, r *http.Request) {
		var zi LegacyZoneIngress
		putJSON(w, r, &zi, func() error { return s.SetLegacyZoneIngress(r.PathValue("name"), zi) })
	})
	mux.HandleFunc("DELETE /zone-ingresses/{name}", func(w http.ResponseWriter, r *http.Request) {
		s.DeleteLegacyZoneIngress(r.PathValue("name"))
		writeJSON(w, http.StatusOK, struct{}{})
	})
	mux.HandleFunc("PUT /zone-egresses/{name}", func(w http.ResponseWriter, r *http.Request) {
		var ze LegacyZoneEgress
		putJSON(w, r, &ze, func() error { return s.SetLegacyZoneEgress(r.PathValue("name"), ze) })
	})
	mux.HandleFunc("DELETE /zone-egresses/{name}", func(w http.ResponseWriter, r *http.Request) {
		s.DeleteLegacyZoneEgress(r.PathValue("name"))
		writeJSON(w, http.StatusOK, struct{}{})
	})
	identity := func(present bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			answer(w, s.SetMeshIdentity(r.PathValue("mesh"), present))
		}
	}
	mux.HandleFunc("PUT /meshes/{mesh}/meshidentity", identity(true))
	mux.HandleFunc("DELETE /meshes/{mesh}/meshidentity", identity(false))
	mux.HandleFunc("PUT /meshes/{mesh}/meshzoneaddresses/{name}", func(w http.ResponseWriter, r *http.Request) {
		var mza MeshZoneAddress
		putJSON(w, r, &mza, func() error { return s.SetMeshZoneAddress(r.PathValue("mesh"), r.PathValue("name"), mza) })
	})
	mux.HandleFunc("DELETE /meshes/{mesh}/meshzoneaddresses/{name}", func(w http.ResponseWriter, r *http.Request) {
		s.DeleteMeshZoneAddress(r.PathValue("mesh"), r.PathValue("name"))
		writeJSON(w, http.StatusOK, struct{}{})
	})
	mux.HandleFunc("PUT /meshes/{mesh}/meshservice-port", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Named *bool `json:"named"`
		}
		putJSON(w, r, &body, func() error {
			if body.Named == nil {
				return errNamedRequired
			}
			return s.SetMeshServicePortNamed(r.PathValue("mesh"), *body.Named)
		})
	})
	mux.HandleFunc("GET /meshes/{mesh}/sidecar", func(w http.ResponseWriter, r *http.Request) {
		zone := r.URL.Query().Get("zone")
		if zone == "" {
			zone = LocalZone
		}
		writeJSON(w, http.StatusOK, s.SidecarView(r.PathValue("mesh"), zone))
	})
}

type adminError string

func (e adminError) Error() string { return string(e) }

const errNamedRequired = adminError("named: required, true or false")

// putJSON decodes the body strictly into v, then applies it: 400 naming
// the field on a bad body or a refused value.
func putJSON(w http.ResponseWriter, r *http.Request, v any, apply func() error) {
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = decodeStrict(body, v)
	}
	if err != nil {
		writeText(w, http.StatusBadRequest, "invalid body: "+err.Error())
		return
	}
	answer(w, apply())
}

func answer(w http.ResponseWriter, err error) {
	if err != nil {
		writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}
