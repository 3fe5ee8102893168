package main

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
)

// Envoy parses its command line with TCLAP (delimiter ' '): "--flag value"
// and "-c value" work, "--flag=value" does not match any argument, a repeated
// flag is "Argument already set!", and "--" makes the rest ignored.

const (
	envoyVersion   = "1.39.0"
	envoyRevision  = "50ef0945fa2c5da4bff7627c3abf41fdd3b7cffd"
	envoyBuild     = envoyRevision + "/" + envoyVersion + "/Clean/RELEASE/BoringSSL"
	versionOutput  = "\nenvoy  version: " + envoyBuild + "\n\n"
	defaultLogFmt  = "[%Y-%m-%d %T.%e][%t][%l][%n] [%g:%#] %v"
	hotRestartVers = "disabled"
)

type options struct {
	configPath            string
	configYAML            string
	mode                  string
	drainTimeS            uint32
	parentShutdownTimeS   uint32
	drainStrategy         string
	disableHotRestart     bool
	logLevel              level
	componentLogLevel     string
	componentLevels       []componentLevel
	logFormat             string
	logFormatEscaped      bool
	logPath               string
	concurrency           uint32
	cpusetThreads         bool
	baseID                uint32
	useDynamicBaseID      bool
	baseIDPath            string
	restartEpoch          uint32
	serviceNode           string
	serviceCluster        string
	serviceZone           string
	adminAddressPath      string
	localAddressIPVersion string
	allowUnknownStatic    bool
	rejectUnknownDynamic  bool
	ignoreUnknownDynamic  bool
	fileFlushIntervalMsec uint32
	socketPath            string
	socketMode            string
	enableCoreDump        bool
	enableMutexTracing    bool
	enableFineGrain       bool
	skipHotRestartNoPar   bool
	skipHotRestartStats   bool
	skipDeprecatedLogs    bool
	disableExtensions     string
	statsTags             []string
	hotRestartVersion     bool

	// Outcomes of built-in TCLAP switches.
	showVersion bool
	showHelp    bool
	// warnings to log once the logger exists
	warnings []string
}

type componentLevel struct {
	name  string
	level level
}

// argParseError is a TCLAP ArgException: it is printed with the usage block.
type argParseError struct {
	id   string // e.g. "--bogus" or "-c (--config-path)" or "(--drain-time-s)"
	text string
}

func (e *argParseError) Error() string { return e.id + " -- " + e.text }

// malformedArgv is Envoy's MalformedArgvException raised after parsing.
type malformedArgv struct{ msg string }

func (e *malformedArgv) Error() string { return e.msg }

type argKind int

const (
	kindString argKind = iota
	kindUint32
	kindSwitch
	kindMulti
)

type argDef struct {
	short, long string
	kind        argKind
	typeDesc    string
	set         func(o *options, v string)
}

func (a *argDef) id() string {
	if a.short != "" {
		return "-" + a.short + " (--" + a.long + ")"
	}
	return "(--" + a.long + ")"
}

func u32(dst func(o *options) *uint32) func(o *options, v string) {
	return func(o *options, v string) { n, _ := parseTCLAPUint32(v); *dst(o) = n }
}

// argDefs lists every flag Envoy 1.3x registers, in declaration order.
var argDefs = []*argDef{
	{long: "base-id", kind: kindUint32, typeDesc: "uint32_t", set: u32(func(o *options) *uint32 { return &o.baseID })},
	{long: "use-dynamic-base-id", kind: kindSwitch, set: func(o *options, _ string) { o.useDynamicBaseID = true }},
	{long: "skip-hot-restart-on-no-parent", kind: kindSwitch, set: func(o *options, _ string) { o.skipHotRestartNoPar = true }},
	{long: "skip-hot-restart-parent-stats", kind: kindSwitch, set: func(o *options, _ string) { o.skipHotRestartStats = true }},
	{long: "base-id-path", kind: kindString, typeDesc: "string", set: func(o *options, v string) { o.baseIDPath = v }},
	{long: "concurrency", kind: kindUint32, typeDesc: "uint32_t", set: u32(func(o *options) *uint32 { return &o.concurrency })},
	{short: "c", long: "config-path", kind: kindString, typeDesc: "string", set: func(o *options, v string) { o.configPath = v }},
	{long: "config-yaml", kind: kindString, typeDesc: "string", set: func(o *options, v string) { o.configYAML = v }},
	{long: "allow-unknown-static-fields", kind: kindSwitch, set: func(o *options, _ string) { o.allowUnknownStatic = true }},
	{long: "reject-unknown-dynamic-fields", kind: kindSwitch, set: func(o *options, _ string) { o.rejectUnknownDynamic = true }},
	{long: "ignore-unknown-dynamic-fields", kind: kindSwitch, set: func(o *options, _ string) { o.ignoreUnknownDynamic = true }},
	{long: "skip-deprecated-logs", kind: kindSwitch, set: func(o *options, _ string) { o.skipDeprecatedLogs = true }},
	{long: "admin-address-path", kind: kindString, typeDesc: "string", set: func(o *options, v string) { o.adminAddressPath = v }},
	{long: "local-address-ip-version", kind: kindString, typeDesc: "string", set: func(o *options, v string) { o.localAddressIPVersion = v }},
	{short: "l", long: "log-level", kind: kindString, typeDesc: "string", set: nil},
	{long: "component-log-level", kind: kindString, typeDesc: "string", set: func(o *options, v string) { o.componentLogLevel = v }},
	{long: "log-format", kind: kindString, typeDesc: "string", set: func(o *options, v string) { o.logFormat = v }},
	{long: "log-format-escaped", kind: kindSwitch, set: func(o *options, _ string) { o.logFormatEscaped = true }},
	{long: "enable-fine-grain-logging", kind: kindSwitch, set: func(o *options, _ string) { o.enableFineGrain = true }},
	{long: "log-path", kind: kindString, typeDesc: "string", set: func(o *options, v string) { o.logPath = v }},
	{long: "restart-epoch", kind: kindUint32, typeDesc: "uint32_t", set: u32(func(o *options) *uint32 { return &o.restartEpoch })},
	{long: "hot-restart-version", kind: kindSwitch, set: func(o *options, _ string) { o.hotRestartVersion = true }},
	{long: "service-cluster", kind: kindString, typeDesc: "string", set: func(o *options, v string) { o.serviceCluster = v }},
	{long: "service-node", kind: kindString, typeDesc: "string", set: func(o *options, v string) { o.serviceNode = v }},
	{long: "service-zone", kind: kindString, typeDesc: "string", set: func(o *options, v string) { o.serviceZone = v }},
	{long: "file-flush-interval-msec", kind: kindUint32, typeDesc: "uint32_t", set: u32(func(o *options) *uint32 { return &o.fileFlushIntervalMsec })},
	{long: "drain-time-s", kind: kindUint32, typeDesc: "uint32_t", set: u32(func(o *options) *uint32 { return &o.drainTimeS })},
	{long: "drain-strategy", kind: kindString, typeDesc: "string", set: func(o *options, v string) { o.drainStrategy = v }},
	{long: "parent-shutdown-time-s", kind: kindUint32, typeDesc: "uint32_t", set: u32(func(o *options) *uint32 { return &o.parentShutdownTimeS })},
	{long: "mode", kind: kindString, typeDesc: "string", set: func(o *options, v string) { o.mode = v }},
	{long: "disable-hot-restart", kind: kindSwitch, set: func(o *options, _ string) { o.disableHotRestart = true }},
	{long: "enable-mutex-tracing", kind: kindSwitch, set: func(o *options, _ string) { o.enableMutexTracing = true }},
	{long: "cpuset-threads", kind: kindSwitch, set: func(o *options, _ string) { o.cpusetThreads = true }},
	{long: "disable-extensions", kind: kindString, typeDesc: "string", set: func(o *options, v string) { o.disableExtensions = v }},
	{long: "socket-path", kind: kindString, typeDesc: "string", set: func(o *options, v string) { o.socketPath = v }},
	{long: "socket-mode", kind: kindString, typeDesc: "string", set: func(o *options, v string) { o.socketMode = v }},
	{long: "enable-core-dump", kind: kindSwitch, set: func(o *options, _ string) { o.enableCoreDump = true }},
	{long: "stats-tag", kind: kindMulti, typeDesc: "string", set: func(o *options, v string) { o.statsTags = append(o.statsTags, v) }},
}

func defaultOptions() *options {
	return &options{
		mode:                  "serve",
		drainTimeS:            600,
		parentShutdownTimeS:   900,
		drainStrategy:         "gradual",
		logLevel:              lvlInfo,
		logFormat:             defaultLogFmt,
		concurrency:           uint32(runtime.NumCPU()),
		localAddressIPVersion: "v4",
		fileFlushIntervalMsec: 10000,
		socketPath:            "@envoy_domain_socket",
		socketMode:            "600",
	}
}

// parseTCLAPUint32 mimics TCLAP's istringstream extraction into uint32_t:
// whitespace separated tokens, a negative value wraps like strtoul.
func parseTCLAPUint32(val string) (uint32, error) {
	fields := strings.Fields(val)
	if len(fields) == 0 {
		return 0, nil
	}
	if len(fields) > 1 {
		return 0, fmt.Errorf("More than one valid value parsed from string '%s'", val)
	}
	s := fields[0]
	neg := false
	if strings.HasPrefix(s, "+") {
		s = s[1:]
	} else if strings.HasPrefix(s, "-") {
		neg = true
		s = s[1:]
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || s == "" {
		return 0, fmt.Errorf("Couldn't read argument value from string '%s'", val)
	}
	if neg {
		return uint32(-int64(n) & math.MaxUint32), nil
	}
	return uint32(n), nil
}

// parseArgs returns options or an *argParseError / *malformedArgv.
func parseArgs(args []string) (*options, error) {
	o := defaultOptions()
	setArgs := map[string]bool{}
	var logLevelValue string
	logLevelSet := false
	concurrencySet := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		switch a {
		case "--version":
			o.showVersion = true
			return o, nil
		case "-h", "--help":
			o.showHelp = true
			return o, nil
		}
		// TCLAP's trimFlag: a value arg may carry its value after a space in
		// the same argv element ("--concurrency 2"); '=' is not a delimiter.
		flag, inline, hasInline := a, "", false
		if i := strings.IndexByte(a, ' '); i > 1 {
			flag, inline, hasInline = a[:i], a[i+1:], true
		}
		var def *argDef
		for _, d := range argDefs {
			if flag == "--"+d.long || (d.short != "" && flag == "-"+d.short) {
				def = d
				break
			}
		}
		if def == nil || (hasInline && def.kind == kindSwitch) {
			return nil, &argParseError{id: a, text: "Couldn't find match for argument"}
		}
		if setArgs[def.long] && def.kind != kindMulti {
			return nil, &argParseError{id: def.id(), text: "Argument already set!"}
		}
		setArgs[def.long] = true
		if def.kind == kindSwitch {
			def.set(o, "")
			continue
		}
		v := inline
		if !hasInline || inline == "" {
			i++
			if i >= len(args) {
				return nil, &argParseError{id: def.id(), text: "Missing a value for this argument!"}
			}
			v = args[i]
		}
		if def.kind == kindUint32 {
			if _, err := parseTCLAPUint32(v); err != nil {
				return nil, &argParseError{id: def.id(), text: err.Error()}
			}
		}
		switch def.long {
		case "log-level":
			logLevelValue, logLevelSet = v, true
		case "concurrency":
			concurrencySet = true
			def.set(o, v)
		default:
			def.set(o, v)
		}
	}

	if logLevelSet {
		lv, err := parseLogLevel(logLevelValue)
		if err != nil {
			return nil, err
		}
		o.logLevel = lv
	}
	if err := o.parseComponentLevels(); err != nil {
		return nil, err
	}
	switch o.mode {
	case "serve", "validate", "init_only":
	default:
		return nil, &malformedArgv{fmt.Sprintf("error: unknown mode '%s'", o.mode)}
	}
	switch o.localAddressIPVersion {
	case "v4", "v6":
	default:
		return nil, &malformedArgv{fmt.Sprintf("error: unknown IP address version '%s'", o.localAddressIPVersion)}
	}
	if o.useDynamicBaseID && o.restartEpoch > 0 {
		return nil, &malformedArgv{fmt.Sprintf("error: cannot use --restart-epoch=%d with --use-dynamic-base-id", o.restartEpoch)}
	}
	if !concurrencySet && o.cpusetThreads {
		o.concurrency = uint32(runtime.NumCPU())
	} else {
		if concurrencySet && o.cpusetThreads {
			o.warnings = append(o.warnings, "Both --concurrency and --cpuset-threads options are set; not applying --cpuset-threads.")
		}
		if o.concurrency < 1 {
			o.concurrency = 1
		}
	}
	if !strings.HasPrefix(o.socketPath, "@") {
		if _, err := strconv.ParseUint(o.socketMode, 8, 64); err != nil {
			return nil, &malformedArgv{fmt.Sprintf("error: invalid socket-mode '%s'", o.socketMode)}
		}
	}
	switch o.drainStrategy {
	case "immediate", "gradual":
	default:
		return nil, &malformedArgv{fmt.Sprintf("error: unknown drain-strategy '%s'", o.drainStrategy)}
	}
	for _, t := range o.statsTags {
		name, value, ok := strings.Cut(t, ":")
		if !ok {
			return nil, &malformedArgv{fmt.Sprintf("error: misformatted stats-tag '%s'", t)}
		}
		if !validTagName(name) {
			return nil, &malformedArgv{fmt.Sprintf("error: misformatted stats-tag '%s' contains invalid char in '%s'", t, name)}
		}
		if strings.Contains(value, ".") {
			return nil, &malformedArgv{fmt.Sprintf("error: misformatted stats-tag '%s' contains invalid char in '%s'", t, value)}
		}
	}
	return o, nil
}

func validTagName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

func parseLogLevel(s string) (level, error) {
	if s == "warn" {
		return lvlWarn, nil
	}
	for i, n := range levelNames {
		if n == s {
			return level(i), nil
		}
	}
	return 0, &malformedArgv{fmt.Sprintf("error: invalid log level specified '%s'", s)}
}

func (o *options) parseComponentLevels() error {
	if o.componentLogLevel == "" {
		return nil
	}
	for _, part := range strings.Split(o.componentLogLevel, ",") {
		kv := strings.Split(part, ":")
		if len(kv) != 2 {
			return &malformedArgv{fmt.Sprintf("error: component log level not correctly specified '%s'", part)}
		}
		lv, err := parseLogLevel(kv[1])
		if err != nil {
			return err
		}
		if !isComponent(kv[0]) {
			return &malformedArgv{fmt.Sprintf("error: invalid component specified '%s'", kv[0])}
		}
		o.componentLevels = append(o.componentLevels, componentLevel{kv[0], lv})
	}
	return nil
}

// briefUsage is TCLAP's short usage block, printed after a parse error.
func briefUsage() string {
	var b strings.Builder
	b.WriteString("Brief USAGE: \n   envoy ")
	for i := len(argDefs) - 1; i >= 0; i-- {
		d := argDefs[i]
		flag := "--" + d.long
		if d.short != "" {
			flag = "-" + d.short
		}
		switch d.kind {
		case kindSwitch:
			fmt.Fprintf(&b, " [%s]", flag)
		case kindMulti:
			fmt.Fprintf(&b, " [%s <%s>] ...", flag, d.typeDesc)
		default:
			fmt.Fprintf(&b, " [%s <%s>]", flag, d.typeDesc)
		}
	}
	b.WriteString(" [--] [--version] [-h]\n")
	return b.String()
}

func parseErrorText(e *argParseError) string {
	return "PARSE ERROR: Argument: " + e.id + "\n" +
		"             " + e.text + "\n\n" +
		briefUsage() + "\n" +
		"For complete USAGE and HELP type: \n   envoy --help\n\n"
}

func helpText() string {
	var b strings.Builder
	b.WriteString("\nUSAGE: \n\n")
	b.WriteString(strings.TrimPrefix(briefUsage(), "Brief USAGE: \n"))
	b.WriteString("\n\nWhere: \n\n")
	for _, d := range argDefs {
		flag := "--" + d.long
		if d.short != "" {
			flag = "-" + d.short + ",  --" + d.long
		}
		if d.kind == kindSwitch {
			fmt.Fprintf(&b, "   %s\n\n", flag)
		} else {
			fmt.Fprintf(&b, "   %s <%s>\n\n", flag, d.typeDesc)
		}
	}
	b.WriteString("   --,  --ignore_rest\n     Ignores the rest of the labeled arguments following this flag.\n\n")
	b.WriteString("   --version\n     Displays version information and exits.\n\n")
	b.WriteString("   -h,  --help\n     Displays usage information and exits.\n\n\n   envoy\n\n")
	return b.String()
}

var errNoConfig = errors.New("At least one of --config-path or --config-yaml or Options::configProto() should be non-empty")
