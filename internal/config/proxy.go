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

// AllowList parses ForwardedAllowIPs (checked by Validate).
func (c *Config) AllowList() *proxy.AllowList {
	a, err := proxy.ParseAllowList(c.ForwardedAllowIPs)
	if err != nil {
		return &proxy.AllowList{}
	}
	return a
}

func (c *Config) validateProxy(bad func(string, ...any)) {
	if _, err := proxy.ParseAllowList(c.ForwardedAllowIPs); err != nil {
		bad("--forwarded-allow-ips: %v", err)
	}
}
