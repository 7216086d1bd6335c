package config

import (
	"os"

	"turnstile/internal/proxy"
)

// EnvForwardedAllowIPs is the environment variable uvicorn and gunicorn
// read for their --forwarded-allow-ips; turnstile reads it too, below
// the flag, TURNSTILE_FORWARDED_ALLOW_IPS and the config file.
const EnvForwardedAllowIPs = "FORWARDED_ALLOW_IPS"

// DefaultForwardedAllowIPs is --forwarded-allow-ips when no flag,
// TURNSTILE_ variable or file sets it: $FORWARDED_ALLOW_IPS, else
// proxy.DefaultAllowIPs.
func DefaultForwardedAllowIPs() string {
	if v := os.Getenv(EnvForwardedAllowIPs); v != "" {
		return v
	}
	return proxy.DefaultAllowIPs
}

func (c *Config) applyProxyDefaults() {
	if c.ForwardedAllowIPs == "" {
		c.ForwardedAllowIPs = DefaultForwardedAllowIPs()
	}
}

// validateProxy parses ForwardedAllowIPs into TrustedProxies.
func (c *Config) validateProxy(bad func(string, ...any)) {
	a, err := proxy.ParseAllowList(c.ForwardedAllowIPs)
	if err != nil {
		bad("--forwarded-allow-ips: %v", err)
		return
	}
	c.TrustedProxies = a
}
