// Package pysrc holds the Python sources that turnstile embeds in its binary.
package pysrc

import _ "embed"

// Bootstrap is python/turnstile/_bootstrap.py: the setup the main Python
// thread runs before it imports the app.
//
//go:embed turnstile/_bootstrap.py
var Bootstrap string

// ASGI is python/turnstile/_asgi.py: the HTTP and lifespan protocols run on
// the loop thread.
//
//go:embed turnstile/_asgi.py
var ASGI string

// Channels is python/turnstile/channels.py: turnstile.channels.ChannelLayer,
// the Channels layer held by Go (internal/chlayer), importable in the
// embedded interpreter (the bootstrap's finder serves it).
//
//go:embed turnstile/channels.py
var Channels string
