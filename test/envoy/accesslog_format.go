package main

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// logContext is what one access-log entry knows: a TCP connection, or an
// HTTP request on one.
type logContext struct {
	start      time.Time
	end        time.Time // zero while the entry is written before the close
	bytesIn    int64
	bytesOut   int64
	connID     uint64
	local      net.Addr
	remote     net.Addr
	logType    string
	cluster    string // tcp_proxy or route cluster
	upstream   string // upstream host address, "" when none was connected
	flags      string // Envoy's short response flags, "" for none
	routeName  string
	protocol   string // HTTP only
	status     int    // HTTP only
	reqHeader  func(string) (string, bool)
	respHeader func(string) (string, bool)
}

// logValue is a formatted value: a string, a number, or absent (nil).
type logValue struct {
	present bool
	str     string
	num     float64
	isNum   bool
}

func strValue(s string) logValue  { return logValue{present: true, str: s} }
func numValue(n float64) logValue { return logValue{present: true, num: n, isNum: true} }
func noValue() logValue           { return logValue{} }

// optStr is absent for "".
func optStr(s string) logValue {
	if s == "" {
		return noValue()
	}
	return strValue(s)
}

func (v logValue) text() string {
	if v.isNum {
		return formatJSONNumber(v.num)
	}
	return v.str
}

type provider interface{ value(c *logContext) logValue }

type literal string

func (l literal) value(*logContext) logValue { return strValue(string(l)) }

type command struct {
	name   string
	arg    string
	maxLen int // 0: no limit
	fn     func(c *logContext, arg string) logValue
}

func (cmd *command) value(c *logContext) logValue {
	v := cmd.fn(c, cmd.arg)
	if cmd.maxLen > 0 && v.present && !v.isNum && len(v.str) > cmd.maxLen {
		v.str = v.str[:cmd.maxLen]
	}
	return v
}

// commandRe is Envoy's commandWithArgsRegex.
var commandRe = regexp.MustCompile(`^%([A-Z0-9_]+)(?:\(([^)]*)\))?(?::([0-9]+))?%`)

// parseFormat splits a format string into literals and commands the way
// SubstitutionFormatParser::parse does, with Envoy's error texts.
func parseFormat(format string) ([]provider, error) {
	var out []provider
	var lit strings.Builder
	for pos := 0; pos < len(format); {
		if format[pos] != '%' {
			lit.WriteByte(format[pos])
			pos++
			continue
		}
		if pos+1 < len(format) && format[pos+1] == '%' {
			lit.WriteByte('%')
			pos += 2
			continue
		}
		if lit.Len() > 0 {
			out = append(out, literal(lit.String()))
			lit.Reset()
		}
		m := commandRe.FindStringSubmatchIndex(format[pos:])
		if m == nil {
			return nil, fmt.Errorf("Incorrect configuration: %s. Couldn't find valid command at position %d", format, pos)
		}
		name := format[pos+m[2] : pos+m[3]]
		hasArg := m[4] >= 0
		arg := ""
		if hasArg {
			arg = format[pos+m[4] : pos+m[5]]
		}
		maxLen := 0
		if m[6] >= 0 {
			maxLen, _ = strconv.Atoi(format[pos+m[6] : pos+m[7]])
		}
		cmd, err := newCommand(name, arg, hasArg, maxLen)
		if err != nil {
			return nil, err
		}
		out = append(out, cmd)
		pos += m[1]
	}
	if lit.Len() > 0 || format == "" {
		out = append(out, literal(lit.String()))
	}
	return out, nil
}

type argRule int

const (
	argNone argRule = iota
	argOptional
	argRequired
)

type commandSpec struct {
	arg argRule
	fn  func(c *logContext, arg string) logValue
}

// unknownToStandIn is for the commands Envoy knows and the stand-in cannot
// compute: they render as absent ("-" in text, null in typed JSON).
func unknownToStandIn(*logContext, string) logValue { return noValue() }

func durationMs(c *logContext) float64 {
	end := c.end
	if end.IsZero() {
		end = time.Now()
	}
	return float64(end.Sub(c.start).Milliseconds())
}

func addrValue(a net.Addr, part string) logValue {
	if a == nil {
		return noValue()
	}
	s := a.String()
	if a.Network() == "unix" {
		if part == "port" {
			return noValue()
		}
		return optStr(s)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return optStr(s)
	}
	switch part {
	case "host":
		return strValue(host)
	case "port":
		n, _ := strconv.Atoi(port)
		return numValue(float64(n))
	}
	return strValue(s)
}

func headerValue(get func(string) (string, bool), arg string) logValue {
	if get == nil {
		return noValue()
	}
	main, alt, _ := strings.Cut(arg, "?")
	if v, ok := get(strings.ToLower(main)); ok {
		return strValue(v)
	}
	if alt != "" {
		if v, ok := get(strings.ToLower(alt)); ok {
			return strValue(v)
		}
	}
	return noValue()
}

// Envoy's DOWNSTREAM_[DIRECT_]{REMOTE,LOCAL}_{ADDRESS,ADDRESS_WITHOUT_PORT,PORT};
// the stand-in reads no PROXY protocol header, so DIRECT is the same address.
func init() {
	sides := map[string]func(*logContext) net.Addr{
		"REMOTE": func(c *logContext) net.Addr { return c.remote },
		"LOCAL":  func(c *logContext) net.Addr { return c.local },
	}
	parts := map[string]string{"_ADDRESS": "", "_ADDRESS_WITHOUT_PORT": "host", "_PORT": "port"}
	for side, addr := range sides {
		for suffix, part := range parts {
			spec := commandSpec{argNone, func(c *logContext, _ string) logValue { return addrValue(addr(c), part) }}
			commandSpecs["DOWNSTREAM_"+side+suffix] = spec
			commandSpecs["DOWNSTREAM_DIRECT_"+side+suffix] = spec
		}
	}
}

var commandSpecs = map[string]commandSpec{
	"START_TIME": {argOptional, func(c *logContext, arg string) logValue { return strValue(formatStartTime(c.start.UTC(), arg)) }},
	"START_TIME_LOCAL": {argOptional, func(c *logContext, arg string) logValue {
		return strValue(formatStartTime(c.start.Local(), arg))
	}},
	"DURATION":       {argNone, func(c *logContext, _ string) logValue { return numValue(durationMs(c)) }},
	"BYTES_RECEIVED": {argNone, func(c *logContext, _ string) logValue { return numValue(float64(c.bytesIn)) }},
	"BYTES_SENT":     {argNone, func(c *logContext, _ string) logValue { return numValue(float64(c.bytesOut)) }},
	"RESPONSE_FLAGS": {argNone, func(c *logContext, _ string) logValue {
		if c.flags == "" {
			return strValue("-")
		}
		return strValue(c.flags)
	}},
	"UPSTREAM_HOST":    {argNone, func(c *logContext, _ string) logValue { return optStr(c.upstream) }},
	"UPSTREAM_CLUSTER": {argNone, func(c *logContext, _ string) logValue { return optStr(c.cluster) }},
	"UPSTREAM_CLUSTER_RAW": {argNone, func(c *logContext, _ string) logValue {
		return optStr(c.cluster)
	}},
	"CONNECTION_ID":   {argNone, func(c *logContext, _ string) logValue { return numValue(float64(c.connID)) }},
	"ACCESS_LOG_TYPE": {argNone, func(c *logContext, _ string) logValue { return strValue(c.logType) }},
	"PROTOCOL":        {argNone, func(c *logContext, _ string) logValue { return optStr(c.protocol) }},
	"RESPONSE_CODE":   {argNone, func(c *logContext, _ string) logValue { return numValue(float64(c.status)) }},
	"ROUTE_NAME":      {argNone, func(c *logContext, _ string) logValue { return optStr(c.routeName) }},
	"HOSTNAME": {argNone, func(*logContext, string) logValue {
		h, err := os.Hostname()
		if err != nil {
			return noValue()
		}
		return strValue(h)
	}},
	"REQ":  {argRequired, func(c *logContext, arg string) logValue { return headerValue(c.reqHeader, arg) }},
	"RESP": {argRequired, func(c *logContext, arg string) logValue { return headerValue(c.respHeader, arg) }},
}

// Commands Envoy accepts whose value the stand-in does not know.
var opaqueCommands = byRule(map[argRule]string{
	argNone: `
		REQUEST_DURATION REQUEST_TX_DURATION RESPONSE_DURATION RESPONSE_TX_DURATION
		DOWNSTREAM_HANDSHAKE_DURATION ROUNDTRIP_DURATION UPSTREAM_CONNECTION_POOL_READY_DURATION
		BYTES_RETRANSMITTED PACKETS_RETRANSMITTED UPSTREAM_WIRE_BYTES_RECEIVED
		UPSTREAM_HEADER_BYTES_RECEIVED DOWNSTREAM_WIRE_BYTES_RECEIVED DOWNSTREAM_HEADER_BYTES_RECEIVED
		UPSTREAM_WIRE_BYTES_SENT UPSTREAM_HEADER_BYTES_SENT DOWNSTREAM_WIRE_BYTES_SENT
		DOWNSTREAM_HEADER_BYTES_SENT UPSTREAM_PROTOCOL RESPONSE_CODE_DETAILS
		CONNECTION_TERMINATION_DETAILS CUSTOM_FLAGS RESPONSE_FLAGS_LONG UPSTREAM_HOST_NAME
		UPSTREAM_HOST_NAME_WITHOUT_PORT UPSTREAM_CONNECTION_ID UPSTREAM_LOCAL_ADDRESS
		UPSTREAM_LOCAL_ADDRESS_WITHOUT_PORT UPSTREAM_LOCAL_PORT UPSTREAM_REMOTE_ADDRESS
		UPSTREAM_REMOTE_ADDRESS_WITHOUT_PORT UPSTREAM_REMOTE_PORT UPSTREAM_REQUEST_ATTEMPT_COUNT
		UPSTREAM_TLS_CIPHER UPSTREAM_TLS_VERSION UPSTREAM_TLS_SESSION_ID UPSTREAM_PEER_ISSUER
		UPSTREAM_PEER_CERT UPSTREAM_PEER_SUBJECT UPSTREAM_PEER_URI_SAN UPSTREAM_PEER_DNS_SAN
		UPSTREAM_PEER_IP_SAN UPSTREAM_LOCAL_URI_SAN UPSTREAM_LOCAL_DNS_SAN UPSTREAM_LOCAL_IP_SAN
		UPSTREAM_LOCAL_SUBJECT UPSTREAM_TRANSPORT_FAILURE_REASON CONNECTION_ID_STRING
		REQUESTED_SERVER_NAME VIRTUAL_CLUSTER_NAME DOWNSTREAM_PEER_URI_SAN DOWNSTREAM_PEER_DNS_SAN
		DOWNSTREAM_PEER_IP_SAN DOWNSTREAM_PEER_EMAIL_SAN DOWNSTREAM_PEER_OTHERNAME_SAN
		DOWNSTREAM_LOCAL_URI_SAN DOWNSTREAM_LOCAL_DNS_SAN DOWNSTREAM_LOCAL_IP_SAN
		DOWNSTREAM_LOCAL_EMAIL_SAN DOWNSTREAM_LOCAL_OTHERNAME_SAN DOWNSTREAM_PEER_SUBJECT
		DOWNSTREAM_LOCAL_SUBJECT DOWNSTREAM_TLS_SESSION_ID DOWNSTREAM_TLS_CIPHER DOWNSTREAM_TLS_VERSION
		DOWNSTREAM_PEER_FINGERPRINT_256 DOWNSTREAM_PEER_FINGERPRINT_1 DOWNSTREAM_PEER_SERIAL
		DOWNSTREAM_PEER_ISSUER DOWNSTREAM_PEER_CERT DOWNSTREAM_TRANSPORT_FAILURE_REASON
		DOWNSTREAM_LOCAL_DNS_SAN_FIRST FILTER_CHAIN_NAME TLS_JA3_FINGERPRINT TLS_JA4_FINGERPRINT UNIQUE_ID
		STREAM_ID TRACE_ID LOCAL_REPLY_BODY GRPC_STATUS_NUMBER REQUEST_HEADERS_BYTES
		RESPONSE_HEADERS_BYTES RESPONSE_TRAILERS_BYTES`,
	argOptional: `
		UPSTREAM_PEER_CERT_V_START UPSTREAM_PEER_CERT_V_END DOWNSTREAM_PEER_CERT_V_START
		DOWNSTREAM_PEER_CERT_V_END EMIT_TIME GRPC_STATUS PATH`,
	argRequired: `
		COMMON_DURATION DYNAMIC_METADATA CLUSTER_METADATA UPSTREAM_METADATA FILTER_STATE
		UPSTREAM_FILTER_STATE ENVIRONMENT METADATA CEL TRAILER QUERY_PARAM REQ_WITHOUT_QUERY`,
})

// byRule maps each of the space-separated command names to its rule.
func byRule(names map[argRule]string) map[string]argRule {
	out := map[string]argRule{}
	for rule, list := range names {
		for _, n := range strings.Fields(list) {
			out[n] = rule
		}
	}
	return out
}

func newCommand(name, arg string, hasArg bool, maxLen int) (*command, error) {
	spec, known := commandSpecs[name]
	if !known {
		rule, ok := opaqueCommands[name]
		if !ok {
			return nil, fmt.Errorf("Not supported field in StreamInfo: %s", name)
		}
		spec = commandSpec{rule, unknownToStandIn}
	}
	switch {
	case spec.arg == argNone && hasArg && arg != "":
		return nil, fmt.Errorf("%s does not have parameters", name)
	case spec.arg == argRequired && arg == "":
		return nil, fmt.Errorf("%s requires parameters", name)
	}
	if name == "REQ" || name == "RESP" {
		if strings.Count(arg, "?") > 1 {
			return nil, fmt.Errorf("More than 1 alternative header specified in token: %s", arg)
		}
	}
	return &command{name: name, arg: arg, maxLen: maxLen, fn: spec.fn}, nil
}

// formatStartTime renders Envoy's default START_TIME format
// (%Y-%m-%dT%H:%M:%E3SZ) or a strftime subset with %E<n>S and %<n>f.
func formatStartTime(t time.Time, layout string) string {
	if layout == "" {
		return t.Format("2006-01-02T15:04:05.000Z")
	}
	var b strings.Builder
	for i := 0; i < len(layout); i++ {
		if layout[i] != '%' || i+1 >= len(layout) {
			b.WriteByte(layout[i])
			continue
		}
		i++
		spec := layout[i]
		digits := -1
		if spec == 'E' && i+2 < len(layout) && layout[i+2] == 'S' {
			digits = int(layout[i+1] - '0')
			i += 2
			b.WriteString(t.Format("05"))
			if digits > 0 {
				b.WriteString("." + fractional(t, digits))
			}
			continue
		}
		if spec >= '1' && spec <= '9' && i+1 < len(layout) && layout[i+1] == 'f' {
			i++
			b.WriteString(fractional(t, int(spec-'0')))
			continue
		}
		switch spec {
		case 'Y':
			b.WriteString(t.Format("2006"))
		case 'm':
			b.WriteString(t.Format("01"))
		case 'd':
			b.WriteString(t.Format("02"))
		case 'H':
			b.WriteString(t.Format("15"))
		case 'M':
			b.WriteString(t.Format("04"))
		case 'S':
			b.WriteString(t.Format("05"))
		case 'f':
			b.WriteString(fractional(t, 9))
		case 's':
			b.WriteString(strconv.FormatInt(t.Unix(), 10))
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'Z':
			b.WriteString(t.Format("MST"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(spec)
		}
	}
	return b.String()
}

func fractional(t time.Time, digits int) string {
	s := fmt.Sprintf("%09d", t.Nanosecond())
	if digits > 9 {
		digits = 9
	}
	return s[:digits]
}

// logFormatter renders one access-log entry.
type logFormatter interface{ format(c *logContext) string }

type textFormatter struct {
	providers []provider
	omitEmpty bool
}

func (f *textFormatter) format(c *logContext) string {
	return renderText(f.providers, c, f.omitEmpty)
}

// renderText joins the values as text, an absent one as "-" unless
// omitEmpty.
func renderText(providers []provider, c *logContext, omitEmpty bool) string {
	var b strings.Builder
	for _, p := range providers {
		v := p.value(c)
		switch {
		case v.present:
			b.WriteString(v.text())
		case !omitEmpty:
			b.WriteString("-")
		}
	}
	return b.String()
}

// jsonNode is a json_format value: a constant, a template, an object or a list.
type jsonNode struct {
	constant  string // pre-serialised JSON
	template  []provider
	keys      []string // sorted, as Envoy's sortJsonStructFields
	fields    map[string]*jsonNode
	list      []*jsonNode
	isObject  bool
	isList    bool
	isLiteral bool
}

type jsonFormatter struct {
	root      *jsonNode
	omitEmpty bool
}

func buildJSONNode(v *structpb.Value) (*jsonNode, error) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		if !strings.Contains(k.StringValue, "%") {
			return &jsonNode{constant: jsonString(k.StringValue), isLiteral: true}, nil
		}
		ps, err := parseFormat(k.StringValue)
		if err != nil {
			return nil, err
		}
		return &jsonNode{template: ps}, nil
	case *structpb.Value_NumberValue:
		return &jsonNode{constant: formatJSONNumber(k.NumberValue), isLiteral: true}, nil
	case *structpb.Value_BoolValue:
		return &jsonNode{constant: strconv.FormatBool(k.BoolValue), isLiteral: true}, nil
	case *structpb.Value_StructValue:
		return buildJSONObject(k.StructValue)
	case *structpb.Value_ListValue:
		n := &jsonNode{isList: true}
		for _, e := range k.ListValue.GetValues() {
			c, err := buildJSONNode(e)
			if err != nil {
				return nil, err
			}
			n.list = append(n.list, c)
		}
		return n, nil
	}
	return &jsonNode{constant: "null", isLiteral: true}, nil
}

func buildJSONObject(s *structpb.Struct) (*jsonNode, error) {
	n := &jsonNode{isObject: true, fields: map[string]*jsonNode{}}
	for k, v := range s.GetFields() {
		c, err := buildJSONNode(v)
		if err != nil {
			return nil, err
		}
		n.fields[k] = c
		n.keys = append(n.keys, k)
	}
	sort.Strings(n.keys)
	return n, nil
}

// render writes the node; ok is false for an empty value that omit-empty drops.
func (f *jsonFormatter) render(b *strings.Builder, n *jsonNode, c *logContext) bool {
	switch {
	case n.isObject:
		b.WriteByte('{')
		first := true
		for _, k := range n.keys {
			var sub strings.Builder
			if !f.render(&sub, n.fields[k], c) {
				continue
			}
			if !first {
				b.WriteByte(',')
			}
			first = false
			b.WriteString(jsonString(k))
			b.WriteByte(':')
			b.WriteString(sub.String())
		}
		b.WriteByte('}')
		return true
	case n.isList:
		b.WriteByte('[')
		first := true
		for _, e := range n.list {
			var sub strings.Builder
			if !f.render(&sub, e, c) {
				continue
			}
			if !first {
				b.WriteByte(',')
			}
			first = false
			b.WriteString(sub.String())
		}
		b.WriteByte(']')
		return true
	case n.isLiteral:
		if f.omitEmpty && n.constant == "null" {
			return false
		}
		b.WriteString(n.constant)
		return true
	}
	if len(n.template) == 1 {
		// A lone command keeps its type: numbers stay numbers, absent is null.
		v := n.template[0].value(c)
		switch {
		case !v.present:
			if f.omitEmpty {
				return false
			}
			b.WriteString("null")
		case v.isNum:
			b.WriteString(formatJSONNumber(v.num))
		default:
			if f.omitEmpty && v.str == "" {
				return false
			}
			b.WriteString(jsonString(v.str))
		}
		return true
	}
	text := renderText(n.template, c, f.omitEmpty)
	if f.omitEmpty && text == "" {
		return false
	}
	b.WriteString(jsonString(text))
	return true
}

func (f *jsonFormatter) format(c *logContext) string {
	var b strings.Builder
	f.render(&b, f.root, c)
	b.WriteByte('\n')
	return b.String()
}

// jsonString quotes like Envoy's sanitizer (nlohmann): only '"', '\' and
// control characters are escaped; '<', '>' and '&' pass through.
func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	valid := utf8.ValidString(s)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		case c >= 0x80 && !valid:
			// Invalid UTF-8 makes nlohmann throw; Envoy falls back to octal.
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func formatJSONNumber(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "null"
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// envoyDefaultFormat is SubstitutionFormatUtils::DEFAULT_FORMAT.
const envoyDefaultFormat = "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%\" " +
	"%RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% " +
	"%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% \"%REQ(X-FORWARDED-FOR)%\" \"%REQ(USER-AGENT)%\" " +
	"\"%REQ(X-REQUEST-ID)%\" \"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\"\n"

// newFormatter builds the formatter of a SubstitutionFormatString (nil: the
// default format).
func newFormatter(sfs *corev3.SubstitutionFormatString) (logFormatter, error) {
	if sfs == nil {
		ps, err := parseFormat(envoyDefaultFormat)
		return &textFormatter{providers: ps}, err
	}
	if len(sfs.GetFormatters()) > 0 {
		return nil, errors.New("formatter extensions are not supported by this Envoy stand-in")
	}
	omit := sfs.GetOmitEmptyValues()
	switch f := sfs.GetFormat().(type) {
	case *corev3.SubstitutionFormatString_JsonFormat:
		root, err := buildJSONObject(f.JsonFormat)
		if err != nil {
			return nil, err
		}
		return &jsonFormatter{root: root, omitEmpty: omit}, nil
	case *corev3.SubstitutionFormatString_TextFormat:
		ps, err := parseFormat(f.TextFormat)
		return &textFormatter{providers: ps, omitEmpty: omit}, err
	case *corev3.SubstitutionFormatString_TextFormatSource:
		text, err := dataSourceText(f.TextFormatSource)
		if err != nil {
			return nil, err
		}
		ps, err := parseFormat(text)
		return &textFormatter{providers: ps, omitEmpty: omit}, err
	}
	return nil, errors.New("SubstitutionFormatString: no format given")
}

// dataSourceText reads a DataSource as Envoy's DataSource::read does.
func dataSourceText(ds *corev3.DataSource) (string, error) {
	switch s := ds.GetSpecifier().(type) {
	case *corev3.DataSource_InlineString:
		return s.InlineString, nil
	case *corev3.DataSource_InlineBytes:
		return string(s.InlineBytes), nil
	case *corev3.DataSource_Filename:
		b, err := os.ReadFile(s.Filename)
		if err != nil {
			return "", fmt.Errorf("unable to read file: %s", s.Filename)
		}
		return string(b), nil
	case *corev3.DataSource_EnvironmentVariable:
		v, ok := os.LookupEnv(s.EnvironmentVariable)
		if !ok {
			return "", fmt.Errorf("Environment variable doesn't exist: %s", s.EnvironmentVariable)
		}
		return v, nil
	}
	return "", nil
}
