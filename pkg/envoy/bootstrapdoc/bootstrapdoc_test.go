package bootstrapdoc

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want, wantErr string
	}{
		{name: "YAML: members sorted, compact", doc: "node: {id: a}\nadmin:\n  address: {pipe: {path: /a.sock, mode: 384}}\n",
			want: `{"admin":{"address":{"pipe":{"mode":384,"path":"/a.sock"}}},"node":{"id":"a"}}`},
		{name: "JSON is YAML too", doc: `{"b":[1,"2",true,null],"a":{}}`, want: `{"a":{},"b":[1,"2",true,null]}`},
		{name: "YAML keys that are not strings", doc: "extra: {1: one, true: x}\n", want: `{"extra":{"1":"one","true":"x"}}`},
		{name: "strings that look numeric stay strings", doc: "build: 0b3f9e1c\nport: \"9901\"\n", want: `{"build":"0b3f9e1c","port":"9901"}`},
		{name: "not YAML", doc: "admin: [", wantErr: "not YAML"},
		{name: "a list", doc: "- admin", wantErr: "not a YAML mapping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Parse([]byte(tc.doc))
			if tc.wantErr != "" || err != nil {
				if err == nil || tc.wantErr == "" || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one that mentions %q", err, tc.wantErr)
				}
				return
			}
			if got := string(o.JSON()); got != tc.want {
				t.Errorf("written %s, want %s", got, tc.want)
			}
		})
	}
}

func TestSection(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
		wantErr         bool
	}{
		{name: "JSON", doc: `{"admin":{"address":{}},"node":{}}`, want: `{"address":{}}`},
		{name: "JSON, after other members", doc: `{"a":[1,{"b":"}"}],"admin":{"x":1}}`, want: `{"x":1}`},
		{name: "snake_case", doc: `{"dynamic_resources":{"x":1}}`, want: `{"x":1}`},
		{name: "YAML", doc: "node: {}\nadmin:\n  x: 1\n", want: `{"x":1}`},
		{name: "absent", doc: `{"node":{}}`},
		{name: "null", doc: `{"admin":null}`},
		{name: "names are exact", doc: `{"Admin":{}}`},
		{name: "neither JSON nor YAML", doc: `{"admin": [}`, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			field := "admin"
			if tc.name == "snake_case" {
				field = "dynamic_resources"
			}
			got, err := Section([]byte(tc.doc), field)
			if (err != nil) != tc.wantErr || string(got) != tc.want {
				t.Errorf("got %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}

// Members are found by either spelling, kept under the spelling the
// document uses, and new ones are inserted in order, camelCase.
func TestObjectKeepsWhatItDoesNotTouch(t *testing.T) {
	o, err := ParseObject([]byte(`{"connect_timeout":"2s","name":"cp","transportSocket":{"x":1},"z":12345678901234567890}`))
	if err != nil {
		t.Fatal(err)
	}
	o.Delete("transport_socket")
	o.Set("connect_timeout", []byte(`"1s"`))
	o.Set("load_assignment", []byte(`{}`))
	o.Set("type", []byte(`"STATIC"`))
	want := `{"connect_timeout":"1s","loadAssignment":{},"name":"cp","type":"STATIC","z":12345678901234567890}`
	if got := string(o.JSON()); got != want {
		t.Errorf("written %s\nwant    %s", got, want)
	}
	if o.String("name") != "cp" || o.String("z") != "" || o.Object("name") != nil || o.List("name") != nil {
		t.Error("a member read as the wrong kind")
	}
}

func TestDecode(t *testing.T) {
	o, err := ParseObject([]byte(`{"address":{"pipe":{"path":"/a.sock"},"newerField":1},"port":{"socket_address":{"port_value":9901}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Decode("address", &corev3.Address{}); err == nil || !strings.Contains(err.Error(), "newerField") {
		t.Errorf("a section to write back with a field this build does not know: %v", err)
	}
	addr := &corev3.Address{}
	if found, err := o.DecodeKnown("address", addr); !found || err != nil || addr.GetPipe().GetPath() != "/a.sock" {
		t.Errorf("read alone: %v %v %v", found, err, addr)
	}
	if found, err := o.Decode("port", addr); !found || err != nil || addr.GetSocketAddress().GetPortValue() != 9901 {
		t.Errorf("snake_case: %v %v %v", found, err, addr)
	}
	if found, err := o.Decode("absent", addr); found || err != nil {
		t.Errorf("absent: %v %v", found, err)
	}
	if err := o.SetProto("address", addr); err != nil {
		t.Fatal(err)
	}
	if got, want := string(o.Raw("address")), `{"socketAddress":{"portValue":9901}}`; got != want {
		t.Errorf("written %s, want %s (compact, camelCase)", got, want)
	}
}
