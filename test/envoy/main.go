// Command envoy is a stand-in for Envoy 1.39 used by zoneproxy's tests. It
// accepts Envoy's command line, loads and validates the bootstrap strictly,
// serves the admin API, follows the ADS server named in the bootstrap and
// binds the listeners it receives. It fails where real Envoy fails and
// never bends to make its caller look good. See hooks.go for the test-only
// environment variables.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	h, err := loadHooks()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	h.recordArgs(args)

	o, err := parseArgs(args)
	if err != nil {
		var pe *argParseError
		if errors.As(err, &pe) {
			io.WriteString(stderr, parseErrorText(pe))
		}
		// Envoy's main prints the exception text once more.
		fmt.Fprintln(stderr, err.Error())
		return 1
	}
	switch {
	case o.showVersion:
		out := versionOutput
		if h.versionOutput != nil {
			out = *h.versionOutput
		}
		io.WriteString(stdout, out)
		return 0
	case o.showHelp:
		io.WriteString(stdout, helpText())
		return 0
	case o.hotRestartVersion:
		io.WriteString(stderr, hotRestartVers)
		return 0
	}

	logOut := stderr
	if o.logPath != "" {
		f, err := os.OpenFile(o.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			fmt.Fprintf(stderr, "Failed to open log-file '%s'. e.what(): unable to open file '%s': %s\n", o.logPath, o.logPath, strerror(err))
			return 1
		}
		defer f.Close()
		logOut = f
	}
	log := newLogger(logOut, o)
	for _, w := range o.warnings {
		log.logf(lvlWarn, "main", "source/server/options_impl.cc:240", "%s", w)
	}

	if o.mode == "validate" {
		return validate(o, log, stdout)
	}
	return serve(o, h, log, stderr)
}

func validate(o *options, log *logger, stdout io.Writer) int {
	if _, err := loadBootstrap(o, log); err != nil {
		log.main(lvlCritical, "error initializing configuration '%s': %s", o.configPath, err)
		return 1
	}
	fmt.Fprintf(stdout, "configuration '%s' OK\n", o.configPath)
	return 0
}

func serve(o *options, h *hooks, log *logger, stderr io.Writer) int {
	sigCh := make(chan os.Signal, 4)
	if h.ignoreSigterm {
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		signal.Notify(sigCh, syscall.SIGHUP, syscall.SIGUSR1)
	} else {
		signal.Notify(sigCh, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1)
	}
	if h.crashAfter > 0 {
		time.AfterFunc(h.crashAfter, func() { h.crash(log) })
	}

	// MainCommonBase builds HotRestartImpl before the server; its exception
	// text goes to stderr alone.
	hot, baseID, err := claimHotRestart(o)
	if err != nil {
		fmt.Fprintln(stderr, err.Error())
		return 1
	}
	defer hot.close()
	o.baseID = baseID
	log.main(lvlInfo, "initializing epoch %d (base id=%d, hot restart version=%s)", o.restartEpoch, o.baseID, hotRestartVers)
	fatal := func(err error) int {
		log.main(lvlCritical, "error initializing configuration '%s': %s", o.configPath, err)
		fmt.Fprintln(stderr, err.Error())
		return 1
	}
	boot, err := loadBootstrap(o, log)
	if err != nil {
		return fatal(err)
	}
	sr := boot.GetStaticResources()
	log.logf(lvlInfo, "main", "source/server/configuration_impl.cc:168", "loading tracing configuration")
	log.logf(lvlInfo, "main", "source/server/configuration_impl.cc:124", "loading %d static secret(s)", len(sr.GetSecrets()))
	log.logf(lvlInfo, "main", "source/server/configuration_impl.cc:130", "loading %d cluster(s)", len(sr.GetClusters()))
	log.logf(lvlInfo, "main", "source/server/configuration_impl.cc:134", "loading %d listener(s)", len(sr.GetListeners()))
	log.logf(lvlInfo, "main", "source/server/configuration_impl.cc:186", "loading stats configuration")

	s := newServer(o, log, boot)
	s.build = h.build()
	s.holdAccept = h.holdAccept

	if h.startDelay > 0 {
		select {
		case <-time.After(h.startDelay):
		case sig := <-sigCh:
			if sig == syscall.SIGTERM || sig == syscall.SIGINT {
				log.main(lvlWarn, "caught %s", sigName(sig))
				log.main(lvlInfo, "exiting")
				return 0
			}
		}
	}

	admin, err := startAdmin(s)
	if err != nil {
		return fatal(err)
	}
	for _, l := range sr.GetListeners() {
		s.mu.Lock()
		_, err := s.addOrUpdateListener(l, "", true)
		s.mu.Unlock()
		if err != nil {
			admin.close()
			return fatal(err)
		}
	}
	ads, err := newADSClient(s)
	if err != nil {
		admin.close()
		return fatal(err)
	}
	if ads != nil {
		ads.dumpHeaders = h.dumpHeaders
	}
	hds, err := newHDSClient(s)
	if err != nil {
		admin.close()
		return fatal(err)
	}
	if o.mode == "init_only" {
		s.shutdown(admin)
		return 0
	}
	if h.wedgeAfter > 0 && admin != nil {
		time.AfterFunc(h.wedgeAfter, func() { admin.wedged.Store(true) })
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if boot.GetDynamicResources().GetCdsConfig() != nil {
		log.upstream(lvlInfo, "source/common/upstream/cluster_manager_impl.cc:225", "cm init: initializing cds")
	}
	log.main(lvlInfo, "starting main dispatch loop")
	go s.housekeeping()
	if ads != nil {
		go ads.run(ctx)
	}
	if hds != nil {
		go hds.run(ctx)
	}

	code := 0
loop:
	for {
		select {
		case sig := <-sigCh:
			switch sig {
			case syscall.SIGHUP:
				log.main(lvlInfo, "caught and eating SIGHUP. See documentation for how to hot restart.")
			case syscall.SIGUSR1:
				log.main(lvlInfo, "caught SIGUSR1. Reopening access logs.")
				s.accessLogs.reopen()
			default:
				log.main(lvlWarn, "caught %s", sigName(sig))
				log.main(lvlInfo, "shutting down server instance")
				break loop
			}
		case code = <-s.exit:
			break loop
		}
	}
	cancel()
	s.shutdown(admin)
	return code
}

func sigName(sig os.Signal) string {
	if sig == syscall.SIGTERM {
		return "ENVOY_SIGTERM"
	}
	return "SIGINT"
}

// shutdown closes the admin listener and every listener and connection.
func (s *server) shutdown(admin *adminServer) {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	admin.close()
	s.mu.Lock()
	for _, l := range s.listeners {
		l.stop()
		l.conns.closeAll()
	}
	for l := range s.drainingLs {
		l.conns.closeAll()
	}
	s.mu.Unlock()
	s.accessLogs.close() // flushes what is buffered, as at Envoy's exit
	s.log.main(lvlInfo, "main dispatch loop exited")
	s.log.main(lvlInfo, "exiting")
}
