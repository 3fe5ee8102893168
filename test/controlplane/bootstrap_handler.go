package controlplane

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"time"
)

// Texts of kuma-cp's bootstrap errors (pkg/xds/bootstrap), byte for byte.
const dpTokenRequiredText = "Dataplane Token is required. Generate token using 'kumactl generate dataplane-token > /path/file' and provide it via --dataplane-token-file=/path/file argument to Kuma DP"

const notCAText = "A data plane proxy is trying to verify the control plane using the certificate which is not a certificate authority (basic constraint 'CA' is set to 'false').\n" +
	"Provide CA that was used to sign a certificate used in the control plane by using 'kuma-dp run --ca-cert-file=file' or via KUMA_CONTROL_PLANE_CA_CERT_FILE"

func sanMismatchText(host, sans string) string {
	return fmt.Sprintf("A data plane proxy is trying to connect to the control plane using %q address, but the certificate in the control plane has the following SANs %s. "+
		"Either change the --cp-address in kuma-dp to one of those or execute the following steps:\n"+
		"1) Generate a new certificate with the address you are trying to use. It is recommended to use trusted Certificate Authority, but you can also generate self-signed certificates using 'kumactl generate tls-certificate --type=server --hostname=%s'\n"+
		"2) Set KUMA_GENERAL_TLS_CERT_FILE and KUMA_GENERAL_TLS_KEY_FILE or the equivalent in Kuma CP config file to the new certificate.\n"+
		"3) Start kuma-dp, the control plane picks up the new certificate on its own.", host, sans, host)
}

// bootstrapResponse is kuma's BootstrapResponse.
type bootstrapResponse struct {
	Bootstrap                []byte                   `json:"bootstrap"`
	KumaSidecarConfiguration kumaSidecarConfiguration `json:"kumaSidecarConfiguration"`
}

type kumaSidecarConfiguration struct {
	Networking struct {
		Address string `json:"address"`
	} `json:"networking"`
	Metrics struct {
		Aggregate map[string]any `json:"aggregate"`
	} `json:"metrics"`
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(p)
}

func writeText(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func writeEmpty(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(status)
}

// handleBootstrap reproduces kuma-cp's /bootstrap checks in kuma-cp's order.
func (s *Server) handleBootstrap(w http.ResponseWriter, r *http.Request) {
	rec := BootstrapRecord{At: time.Now(), Header: r.Header.Clone()}
	sr := &statusRecorder{ResponseWriter: w}
	body, readErr := io.ReadAll(r.Body)
	rec.Body = body
	defer func() {
		rec.Status = sr.status
		s.addRecord(rec)
	}()

	f := s.currentFaults()
	if f.BootstrapDelay > 0 {
		t := time.NewTimer(f.BootstrapDelay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if f.BootstrapStatus != 0 {
		s.log.printf("bootstrap %d (fault injected)", f.BootstrapStatus)
		if f.BootstrapRetryAfter != "" {
			sr.Header().Set("Retry-After", f.BootstrapRetryAfter)
		}
		writeText(sr, f.BootstrapStatus, fmt.Sprintf("fault injected: status %d", f.BootstrapStatus))
		return
	}
	status, reason := s.bootstrap(sr, r, body, readErr)
	s.log.printf("bootstrap %d %s", status, reason)
}

// bootstrap writes the answer and returns its status and a log reason
// (never the token).
func (s *Server) bootstrap(w http.ResponseWriter, r *http.Request, body []byte, readErr error) (int, string) {
	if readErr != nil {
		writeEmpty(w, http.StatusInternalServerError)
		return 500, "could not read the request body"
	}
	var req bootstrapRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeEmpty(w, http.StatusBadRequest)
		return 400, fmt.Sprintf("could not parse a request: %v", err)
	}
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	host = (&url.URL{Host: host}).Hostname()
	if req.ProxyType == "" {
		req.ProxyType = "dataplane"
	}
	id := fmt.Sprintf("node=%s.%s", req.Mesh, req.Name)

	if !s.opts.AuthDisabled && req.ProxyType == "dataplane" && req.DataplaneToken == "" && req.DataplaneTokenPath == "" {
		writeText(w, http.StatusUnprocessableEntity, dpTokenRequiredText)
		return 422, id + " dataplane token is required"
	}
	if err := s.certs.leaf.VerifyHostname(host); err != nil {
		writeText(w, http.StatusBadRequest, sanMismatchText(host, s.certs.sanList()))
		return 400, fmt.Sprintf("%s host %q is not in the certificate SANs", id, host)
	}
	if req.ProxyType != "dataplane" {
		writeEmpty(w, http.StatusInternalServerError)
		return 500, fmt.Sprintf("%s unknown proxy type %v", id, req.ProxyType)
	}
	if req.DataplaneResource == "" {
		// This CP has no stored Dataplanes.
		writeEmpty(w, http.StatusNotFound)
		return 404, id + " dataplane not found in the store"
	}
	dp, err := parseDataplane([]byte(req.DataplaneResource))
	if err != nil {
		writeEmpty(w, http.StatusInternalServerError)
		return 500, fmt.Sprintf("%s invalid Dataplane object: %v", id, err)
	}
	if err := validateDataplane(dp); err != nil {
		writeText(w, http.StatusUnprocessableEntity, err.Error())
		return 422, fmt.Sprintf("%s invalid Dataplane: %v", id, err)
	}
	if !s.meshExists(dp.Mesh) {
		msg := fmt.Sprintf("mesh: mesh %q does not exist", dp.Mesh)
		writeText(w, http.StatusUnprocessableEntity, msg)
		return 422, id + " " + msg
	}

	caPEM := s.certs.caPEM
	if req.CaCert != "" {
		block, _ := pem.Decode([]byte(req.CaCert))
		if block == nil {
			writeEmpty(w, http.StatusInternalServerError)
			return 500, id + " caCert has no PEM block"
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			writeEmpty(w, http.StatusInternalServerError)
			return 500, fmt.Sprintf("%s caCert is not a certificate: %v", id, err)
		}
		if cert.BasicConstraintsValid && !cert.IsCA {
			writeText(w, http.StatusBadRequest, notCAText)
			return 400, id + " caCert is not a CA"
		}
		caPEM = []byte(req.CaCert)
	} else if s.certs.caCert.BasicConstraintsValid && !s.certs.caCert.IsCA {
		writeText(w, http.StatusBadRequest, notCAText)
		return 400, id + " server CA is not a CA"
	}

	adminPort := uint32(defaultAdminPort)
	if dp.Networking.AdminPort != 0 {
		adminPort = dp.Networking.AdminPort
	}
	b, err := generateBootstrap(bootstrapParams{
		req:        &req,
		dp:         dp,
		xdsHost:    host,
		xdsPort:    s.port(),
		caPEM:      caPEM,
		adminPort:  adminPort,
		reloadable: s.opts.ReloadableTokens,
		runtime:    s.bootstrapRuntime(),
		kuma:       s.Kuma(),
	})
	if err != nil {
		writeEmpty(w, http.StatusInternalServerError)
		return 500, fmt.Sprintf("%s generated bootstrap is invalid: %v", id, err)
	}
	y, err := bootstrapYAML(b)
	if err != nil {
		writeEmpty(w, http.StatusInternalServerError)
		return 500, fmt.Sprintf("%s could not serialize the bootstrap: %v", id, err)
	}

	if r.Header.Get("Accept") == "application/json" {
		resp := bootstrapResponse{Bootstrap: y}
		resp.KumaSidecarConfiguration.Networking.Address = dp.Networking.Address
		out, err := json.Marshal(resp)
		if err != nil {
			writeEmpty(w, http.StatusInternalServerError)
			return 500, fmt.Sprintf("%s could not marshal the response: %v", id, err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(out)
		return 200, fmt.Sprintf("%s xdsHost=%s (json)", id, host)
	}
	w.Header().Set("Content-Type", "text/x-yaml")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(y)
	return 200, fmt.Sprintf("%s xdsHost=%s (yaml)", id, host)
}

// SetBootstrapRuntime sets a value of the bootstrap's static runtime layer
// "kuma" in every bootstrap from now on, as a kuma-cp upgrade changes its
// bootstrap template; the Envoys that run keep theirs.
func (s *Server) SetBootstrapRuntime(key string, value float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runtime == nil {
		s.runtime = map[string]float64{}
	}
	s.runtime[key] = value
	s.log.printf("bootstrap runtime %s=%v", key, value)
}

func (s *Server) bootstrapRuntime() map[string]float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.runtime)
}
