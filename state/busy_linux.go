package state

import (
	"os"
	"syscall"
)

// lockHolder returns the pid holding a flock on path, from /proc/locks, or
// 0 when it cannot tell (best effort: the pid may belong to another pid
// namespace, or the lock may have been released meanwhile).
func lockHolder(path string) int {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer f.Close()
	dev := uint64(st.Dev)
	return parseLocks(f, fileID{
		major: (dev>>8)&0xfff | (dev>>32)&^0xfff,
		minor: dev&0xff | uint64(uint32(dev>>12))&^0xff,
		ino:   uint64(st.Ino),
	})
}
