package static

import (
	"errors"
	"io"
	"strings"

	"golang.org/x/sys/unix"
)

// Symlinks is the policy for symbolic links below a mount's directory
// (case B38), named after nginx's disable_symlinks. The mount directory
// itself may be or sit under a symlink in every mode (a deploy that swaps
// a "current" link keeps working); the policy governs the URL's segments.
type Symlinks int

const (
	// SymlinksFollow follows every symlink, wherever it points (nginx
	// "disable_symlinks off"; Django collectstatic --link output works).
	// Traversal is refused on the URL's segments, not by comparing real
	// paths. The default.
	SymlinksFollow Symlinks = iota
	// SymlinksOwner follows a symlink only when the link and its target
	// have the same owner (nginx "disable_symlinks if_not_owner"); else 403.
	SymlinksOwner
	// SymlinksNoFollow refuses a symlink in any segment below the mount
	// with 403: each segment is opened with openat(2) and O_NOFOLLOW from
	// the directory opened before it, so a link swapped in between checks
	// is refused too (nginx "disable_symlinks on").
	SymlinksNoFollow
)

// ParseSymlinks maps a --static-symlinks value (follow, owner, nofollow)
// to a Symlinks. Errors: ErrSymlinks.
func ParseSymlinks(s string) (Symlinks, error) {
	switch s {
	case "", "follow":
		return SymlinksFollow, nil
	case "owner", "if_not_owner":
		return SymlinksOwner, nil
	case "nofollow", "no-follow":
		return SymlinksNoFollow, nil
	}
	return 0, ErrSymlinks
}

func (s Symlinks) String() string {
	switch s {
	case SymlinksOwner:
		return "owner"
	case SymlinksNoFollow:
		return "nofollow"
	}
	return "follow"
}

// errSymlink is returned by open when the policy refuses a symlink.
var errSymlink = errors.New("static: symlink refused by --static-symlinks")

// Open flags: O_NONBLOCK so that a FIFO under the mount cannot block the
// open (it is then refused as not a regular file; reads of regular files
// ignore O_NONBLOCK).
const openFlags = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK

// open opens the file named by rel (checked by checkSegments, non-empty,
// no "" segment) under dir with policy pol, and fstats it. suffix is added
// to the last segment (".br", ".gz" siblings). It returns a raw
// descriptor, still O_NONBLOCK (which reads of a regular file ignore): the
// common small-file path needs no *os.File. The caller closes fd.
// Errors: errSymlink, or the open/fstat errno.
func open(dir string, rel []string, suffix string, pol Symlinks, st *unix.Stat_t) (int, error) {
	var fd int
	var err error
	last := rel[len(rel)-1] + suffix
	if pol == SymlinksFollow {
		var b strings.Builder
		n := len(dir) + len(suffix)
		for _, s := range rel {
			n += len(s) + 1
		}
		b.Grow(n)
		b.WriteString(dir)
		for _, s := range rel[:len(rel)-1] {
			b.WriteByte('/')
			b.WriteString(s)
		}
		b.WriteByte('/')
		b.WriteString(last)
		fd, err = openRetry(unix.AT_FDCWD, b.String(), openFlags)
	} else {
		fd, err = openBeneath(dir, rel[:len(rel)-1], last, pol)
	}
	if err != nil {
		return -1, err
	}
	if err := unix.Fstat(fd, st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// isRegular reports whether st describes a regular file.
func isRegular(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFREG }

// pread fills b from fd at off (pread(2), retried on EINTR and short
// reads). io.ErrUnexpectedEOF if the file ends first.
func pread(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := unix.Pread(fd, b, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}

// openBeneath walks dirs then last from dir, one openat(2) per segment,
// applying pol (SymlinksOwner or SymlinksNoFollow) to each segment.
func openBeneath(dir string, dirs []string, last string, pol Symlinks) (int, error) {
	at, err := openRetry(unix.AT_FDCWD, dir, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_DIRECTORY)
	if err != nil {
		return -1, err
	}
	step := func(name string) (int, error) {
		flags := openFlags | unix.O_NOFOLLOW
		if pol == SymlinksOwner {
			var lst unix.Stat_t
			if err := unix.Fstatat(at, name, &lst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return -1, err
			}
			if lst.Mode&unix.S_IFMT == unix.S_IFLNK {
				var tst unix.Stat_t
				if err := unix.Fstatat(at, name, &tst, 0); err != nil {
					return -1, err
				}
				if tst.Uid != lst.Uid {
					return -1, errSymlink
				}
				flags = openFlags
			}
		}
		fd, err := openRetry(at, name, flags)
		if err == unix.ELOOP && flags&unix.O_NOFOLLOW != 0 {
			// O_NOFOLLOW: the segment itself is a symlink.
			err = errSymlink
		}
		return fd, err
	}
	for _, name := range dirs {
		fd, err := step(name)
		unix.Close(at)
		if err != nil {
			return -1, err
		}
		at = fd
	}
	fd, err := step(last)
	unix.Close(at)
	return fd, err
}

func openRetry(at int, path string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(at, path, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}
