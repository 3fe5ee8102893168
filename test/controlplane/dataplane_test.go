package controlplane

import "testing"

// Rows marked "live" are the 422 bodies observed on a real kuma-cp
// (kuma-live.md §3); the others follow the contract's rules (§3.2).
func TestValidateDataplane(t *testing.T) {
	rows := []struct {
		name string
		dp   string
		want string // "" = valid
	}{
		{"egress only", `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"127.0.0.1","listeners":[{"type":"ZoneEgress","address":"127.0.0.1","port":10002,"name":"ze"}]}}`, ""},
		{"combined", `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"127.0.0.1","listeners":[{"type":"ZoneEgress","address":"127.0.0.1","port":10002},{"type":"ZoneIngress","address":"127.0.0.1","port":10001}]}}`, ""},
		{"no inbounds, no listeners (live: 200)", `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"127.0.0.1"}}`, ""},
		{"listener without name (live: 200)", `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"127.0.0.1","listeners":[{"type":"ZoneIngress","address":"127.0.0.1","port":10001}]}}`, ""},
		{"DNS name address", `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"zp.example.com"}}`, ""},
		{"enum by number", `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"127.0.0.1","listeners":[{"type":2,"address":"127.0.0.1","port":10002}]}}`, ""},
		{"proto field names", `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"127.0.0.1","advertised_address":"10.0.0.1","inbound":[{"port":8080,"service_port":8081}]}}`, ""},
		{"live: listener without type", `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"127.0.0.1","listeners":[{"address":"127.0.0.1","port":10001}]}}`,
			"networking.listeners[0].type: type must be ZoneIngress or ZoneEgress"},
		{"live: no addresses", `{"type":"Dataplane","mesh":"m","name":"n","networking":{"listeners":[{"type":"ZoneIngress","port":10001}]}}`,
			"networking.address: address can't be empty; networking.listeners[0].address: address can't be empty"},
		{"live: wildcard and port 0", `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"127.0.0.1","listeners":[{"type":"ZoneIngress","address":"0.0.0.0","port":0}]}}`,
			"networking.listeners[0].address: must not be 0.0.0.0 or ::; networking.listeners[0].port: port must be in the range [1, 65535]"},
		{"live: same addr:port, different types, same name", `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"127.0.0.1","listeners":[{"type":"ZoneIngress","address":"127.0.0.1","port":10001,"name":"p"},{"type":"ZoneEgress","address":"127.0.0.1","port":10001,"name":"p"}]}}`,
			`networking.listeners[1].name: name "p" must be unique across inbounds and listeners; networking.listeners[1]: address:port 127.0.0.1:10001 is used by listeners of different types`},
		{"live: collides with an inbound", `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"127.0.0.1","inbound":[{"port":10001,"name":"zi-port"}],"listeners":[{"type":"ZoneIngress","address":"127.0.0.1","port":10001,"name":"zi-port"}]}}`,
			`networking.listeners[0].name: name "zi-port" must be unique across inbounds and listeners; networking.listeners[0]: address:port 127.0.0.1:10001 collides with an inbound listener`},
		{"live: delegated gateway with listeners", `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"127.0.0.1","gateway":{"tags":{"kuma.io/service":"gw"}},"listeners":[{"type":"ZoneIngress","address":"127.0.0.1","port":10001}]}}`,
			"networking.listeners: listeners cannot be defined for delegated gateways"},
		{"builtin gateway may have listeners", `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"127.0.0.1","gateway":{"type":"BUILTIN","tags":{"kuma.io/service":"gw"}},"listeners":[{"type":"ZoneIngress","address":"127.0.0.1","port":10001}]}}`, ""},
		{"same type on the same addr:port", `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"127.0.0.1","listeners":[{"type":"ZoneEgress","address":"127.0.0.1","port":10002},{"type":"ZoneEgress","address":"127.0.0.1","port":10002}]}}`,
			"networking.listeners[1]: address:port 127.0.0.1:10002 is already used by another listener"},
		{"IPv6 wildcard", `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"::"}}`, "networking.address: must not be 0.0.0.0 or ::"},
		{"invalid address", `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"not an address!"}}`, "networking.address: address has to be valid IP address or domain name"},
		{"port too big", `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"127.0.0.1","listeners":[{"type":"ZoneEgress","address":"127.0.0.1","port":70000}]}}`,
			"networking.listeners[0].port: port must be in the range [1, 65535]"},
		{"no networking", `{"type":"Dataplane","mesh":"m","name":"n"}`, "networking: must be defined"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			dp, err := parseDataplane([]byte(r.dp))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			got := ""
			if err := validateDataplane(dp); err != nil {
				got = err.Error()
			}
			if got != r.want {
				t.Errorf("got  %q\nwant %q", got, r.want)
			}
		})
	}
}

func TestParseDataplaneRejects(t *testing.T) {
	for name, in := range map[string]string{
		"unknown enum":       `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"127.0.0.1","listeners":[{"type":"Egress"}]}}`,
		"string for number":  `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"127.0.0.1","listeners":[{"type":"ZoneEgress","port":"x"}]}}`,
		"negative port":      `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"127.0.0.1","listeners":[{"type":"ZoneEgress","port":-1}]}}`,
		"listeners not list": `{"type":"Dataplane","mesh":"m","name":"n","networking":{"address":"127.0.0.1","listeners":{}}}`,
		"networking string":  `{"type":"Dataplane","mesh":"m","name":"n","networking":"x"}`,
		"bad creation time":  `{"type":"Dataplane","mesh":"m","name":"n","creationTime":"yesterday"}`,
		"other resource":     `{"type":"MeshService","mesh":"m","name":"n"}`,
	} {
		if _, err := parseDataplane([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
