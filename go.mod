module turnstile

go 1.26.8
