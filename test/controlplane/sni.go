package controlplane

// DestinationSNI is the SNI of the destination this control plane pretends
// sits behind a zone listener: MeshService "backend" (port "http") for
// role "ingress", MeshExternalService "httpbin" (port 80) for "egress".
// A client's TLS ClientHello must name it to match the listener's only
// filter chain; any other role gives "".
func DestinationSNI(mesh, role string) string {
	switch role {
	case "ingress":
		return "sni.msvc." + mesh + ".default.backend.http"
	case "egress":
		return "sni.extsvc." + mesh + ".default.httpbin.80"
	}
	return ""
}
