package main

import "golang.org/x/sys/unix"

// sharedMemory is the tmpfs most Linux hosts mount; the bench's work dirs
// go there because a systemd unit's RuntimeDirectory (/run) is tmpfs, and
// the bootstrap's create and the admin socket cost more on a disk.
const sharedMemory = "/dev/shm"

func onTmpfs(dir string) bool {
	var fs unix.Statfs_t
	return unix.Statfs(dir, &fs) == nil && fs.Type == unix.TMPFS_MAGIC
}
