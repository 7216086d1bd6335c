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
