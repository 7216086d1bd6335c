package config

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// Credential resolves User and Group (names or numeric ids) to the
// credentials the master starts workers with, or nil when neither is
// set. Group defaults to User's primary group; the supplementary groups
// are User's (as initgroups(3) would set them), none for a bare numeric
// id with no passwd entry. Changing credentials needs root: otherwise
// only the current ids are accepted.
func (c *Config) Credential() (*syscall.Credential, error) {
	if c.User == "" && c.Group == "" {
		return nil, nil
	}
	cred := &syscall.Credential{Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid()), Groups: []uint32{}}
	var u *user.User
	if c.User != "" {
		var err error
		if u, err = lookupUser(c.User); err != nil {
			return nil, fmt.Errorf("--user %q: %v", c.User, err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		cred.Uid, cred.Gid = uint32(uid), uint32(gid)
		if u.Username != "" {
			if ids, err := u.GroupIds(); err == nil {
				for _, g := range ids {
					if n, err := strconv.ParseUint(g, 10, 32); err == nil {
						cred.Groups = append(cred.Groups, uint32(n))
					}
				}
			}
		}
	}
	if c.Group != "" {
		gid, err := lookupGroup(c.Group)
		if err != nil {
			return nil, fmt.Errorf("--group %q: %v", c.Group, err)
		}
		cred.Gid = gid
	}
	if os.Geteuid() != 0 && (cred.Uid != uint32(os.Getuid()) || cred.Gid != uint32(os.Getgid())) {
		if c.User != "" {
			return nil, fmt.Errorf("--user %q: switching user needs root (turnstile runs as uid %d)", c.User, os.Getuid())
		}
		return nil, fmt.Errorf("--group %q: switching group needs root (turnstile runs as uid %d)", c.Group, os.Getuid())
	}
	if os.Geteuid() != 0 {
		cred.NoSetGroups = true
	}
	return cred, nil
}

func lookupUser(s string) (*user.User, error) {
	u, err := user.Lookup(s)
	if err == nil {
		return u, nil
	}
	if _, perr := strconv.ParseUint(s, 10, 32); perr == nil {
		if u, err := user.LookupId(s); err == nil {
			return u, nil
		}
		// A numeric id with no passwd entry: its own group.
		return &user.User{Uid: s, Gid: s}, nil
	}
	return nil, fmt.Errorf("no such user")
}

func lookupGroup(s string) (uint32, error) {
	if g, err := user.LookupGroup(s); err == nil {
		n, _ := strconv.ParseUint(g.Gid, 10, 32)
		return uint32(n), nil
	}
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(n), nil
	}
	return 0, fmt.Errorf("no such group")
}
