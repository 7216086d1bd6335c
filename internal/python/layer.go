package python

/*
#include <stdlib.h>
void ts_layer_set_source(const char *src);
*/
import "C"

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"turnstile/internal/chlayer"
	pysrc "turnstile/python"
)

func init() {
	C.ts_layer_set_source(C.CString(pysrc.Channels)) // kept for the process's life
}

// layerConfig is what channels.py's ChannelLayer passes to open(): its
// CONFIG, seconds as floats, channel_capacity as [kind, pattern, capacity]
// with kind "glob" (a str key) or "re" (a compiled pattern's text).
type layerConfig struct {
	Prefix      string   `json:"prefix"`
	Capacity    int      `json:"capacity"`
	Expiry      float64  `json:"expiry"`
	GroupExpiry float64  `json:"group_expiry"`
	Patterns    [][3]any `json:"channel_capacity"`
}

func layerOpen(b []byte) (int, error) {
	var lc layerConfig
	if err := json.Unmarshal(b, &lc); err != nil {
		return -1, err
	}
	c := chlayer.Config{
		Prefix:      lc.Prefix,
		Capacity:    lc.Capacity,
		Expiry:      time.Duration(lc.Expiry * float64(time.Second)),
		GroupExpiry: time.Duration(lc.GroupExpiry * float64(time.Second)),
	}
	for _, p := range lc.Patterns {
		kind, _ := p[0].(string)
		text, _ := p[1].(string)
		capf, _ := p[2].(float64)
		var re *regexp.Regexp
		var err error
		if kind == "glob" {
			re, err = chlayer.GlobPattern(text)
		} else {
			// Python's \Z is RE2's \z; re.match anchors at the start.
			re, err = regexp.Compile(`^(?:` + strings.ReplaceAll(text, `\Z`, `\z`) + `)`)
		}
		if err != nil {
			return -1, fmt.Errorf("channel_capacity pattern %q: %v", text, err)
		}
		c.Patterns = append(c.Patterns, chlayer.Pattern{Re: re, Capacity: int(capf)})
	}
	return chlayer.Host.Open(c), nil
}

func layerCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, chlayer.ErrFull):
		return 1
	case errors.Is(err, chlayer.ErrMemory):
		return 2
	case errors.Is(err, chlayer.ErrTooLarge):
		return 3
	default:
		return 4
	}
}

// packDeliveries lays out deliveries for layer.c's take():
// (u32 LE name length, name, u32 LE data length, data)...
func packDeliveries(ds []chlayer.Delivery) []byte {
	n := 0
	for _, d := range ds {
		n += 8 + len(d.Channel) + len(d.Data)
	}
	b := make([]byte, 0, n)
	for _, d := range ds {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(d.Channel)))
		b = append(b, d.Channel...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(d.Data)))
		b = append(b, d.Data...)
	}
	return b
}
