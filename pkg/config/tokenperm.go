package config

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"

	"github.com/zoneproxy/zoneproxy/pkg/errtext"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/token"
)

// agentIDs is whom the agent runs as (effective user and group); tests
// fake it, and the names of users and groups.
var (
	agentIDs    = func() (uid, gid int) { return os.Geteuid(), os.Getegid() }
	lookupUser  = user.LookupId
	lookupGroup = user.LookupGroupId
)

// RunAs makes the token file's checks judge for the user and group the
// agent will run as, when that is not who validates: `check --instance`
// run as root for a unit with User=.
func RunAs(uid, gid int) {
	agentIDs = func() (int, int) { return uid, gid }
}

// TokenFileExposure says who besides the agent can read or replace the
// token file at path, one sentence each with the fix; nothing when only
// the agent (and root) can:
//   - any permission for other users;
//   - any permission for the file's group when that group is not the
//     agent's own (effective) group: 0640 with the agent's group is fine;
//   - an owner other than the agent's user or root: that user can replace
//     the credential (root can whoever owns it).
func TokenFileExposure(path string, fi token.FileInfo) []string {
	if fi.UID < 0 && fi.GID < 0 && fi.Mode == 0 {
		return nil // an inline token, or a file never opened
	}
	uid, gid := agentIDs()
	p := errtext.Value(path)
	var out []string
	if fi.Mode&0o007 != 0 {
		out = append(out, fmt.Sprintf("%s has mode %04o: other users %s this credential; chmod 600 it (or 640 with the agent's group)",
			p, fi.Mode, access(fi.Mode, 0o004, 0o002)))
	}
	if fi.Mode&0o070 != 0 && fi.GID >= 0 && fi.GID != gid {
		out = append(out, fmt.Sprintf("%s has mode %04o and its group is %s, not the agent's group %s: that group's members %s this credential; chmod 600 it, or chgrp it to %s",
			p, fi.Mode, groupName(fi.GID), groupName(gid), access(fi.Mode, 0o040, 0o020), groupArg(gid)))
	}
	switch {
	case fi.UID < 0 || fi.UID == uid || fi.UID == 0:
	case uid == 0:
		out = append(out, fmt.Sprintf("%s is owned by %s, not by root, whom the agent runs as: that user can replace this credential; chown it to root",
			p, userName(fi.UID)))
	default:
		out = append(out, fmt.Sprintf("%s is owned by %s, neither the agent's user %s nor root: that user can replace this credential; chown it to %s (or root)",
			p, userName(fi.UID), userName(uid), userArg(uid)))
	}
	return out
}

// access words what a class of users (r, w its read and write bits) may
// do with the file.
func access(m fs.FileMode, r, w fs.FileMode) string {
	switch {
	case m&r != 0 && m&w != 0:
		return "can read and change"
	case m&r != 0:
		return "can read"
	case m&w != 0:
		return "can change"
	}
	return "have permissions on"
}

func userName(uid int) string {
	if u, err := lookupUser(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return fmt.Sprintf("%s (uid %d)", errtext.Arg(u.Username), uid)
	}
	return fmt.Sprintf("uid %d", uid)
}

func userArg(uid int) string {
	if u, err := lookupUser(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return errtext.Arg(u.Username)
	}
	return strconv.Itoa(uid)
}

func groupName(gid int) string {
	if g, err := lookupGroup(strconv.Itoa(gid)); err == nil && g.Name != "" {
		return fmt.Sprintf("%s (gid %d)", errtext.Arg(g.Name), gid)
	}
	return fmt.Sprintf("gid %d", gid)
}

func groupArg(gid int) string {
	if g, err := lookupGroup(strconv.Itoa(gid)); err == nil && g.Name != "" {
		return errtext.Arg(g.Name)
	}
	return strconv.Itoa(gid)
}
