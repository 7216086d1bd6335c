module turnstile/bench

go 1.26.8

require (
	github.com/gorilla/websocket v1.5.3
	github.com/quic-go/quic-go v0.65.0
	golang.org/x/net v0.62.0
	turnstile v0.0.0
)

require (
	github.com/quic-go/qpack v0.6.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

// The bench front ends (front/, h2/front/) build the server's own
// connection layers, turnstile/internal/http1 and turnstile/internal/h2,
// from this checkout: Go lets turnstile/bench/... import turnstile/internal/...
// since both paths are rooted at turnstile/.
replace turnstile => ../
