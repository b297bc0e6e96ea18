package local

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"sync"
)

// The local provider also works from inside an unprivileged user namespace (the provider
// conformance test runs it there when not run as root): the namespace's root may create network
// namespaces, bridges, veths and mounts of its own, but the kernel refuses it device nodes
// (mknod), and files of ids the namespace does not map (the host's root, among others) show the
// overflow id, which a mount option or chown may not name (user_namespaces(7)).

// idMaps are this process's uid and gid maps, read once (a process's maps never change).
var idMaps = sync.OnceValues(func() (uids, gids [][3]uint64) {
	return readIDMap("/proc/self/uid_map"), readIDMap("/proc/self/gid_map")
})

// readIDMap parses a uid_map or gid_map: lines of "inside outside count". A file that cannot
// be read is taken as the initial namespace's identity map.
func readIDMap(path string) [][3]uint64 {
	f, err := os.Open(path)
	if err != nil {
		return [][3]uint64{{0, 0, 1 << 32}}
	}
	defer f.Close()
	var m [][3]uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 {
			continue
		}
		var r [3]uint64
		ok := true
		for i, s := range fs {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				ok = false
			}
			r[i] = n
		}
		if ok {
			m = append(m, r)
		}
	}
	return m
}

// inMap says whether id (as this namespace numbers it) is one of m's.
func inMap(m [][3]uint64, id uint32) bool {
	for _, r := range m {
		if uint64(id) >= r[0] && uint64(id) < r[0]+r[2] {
			return true
		}
	}
	return false
}

// ownerMapped says whether this namespace maps both uid and gid, so that a mount option or a
// chown may name them.
func ownerMapped(uid, gid uint32) bool {
	uids, gids := idMaps()
	return inMap(uids, uid) && inMap(gids, gid)
}
