"""Keep N requests to URL in flight until killed: N threads, each a loop of
GET URL (a fresh connection per request, so every server sees the same).
Prints one line per completed request on exit: count and mean seconds."""
import http.client
import signal
import sys
import threading
import time
from urllib.parse import urlsplit

url, n = sys.argv[1], int(sys.argv[2])
u = urlsplit(url)
stop = threading.Event()
done, errors, spent = [0], [0], [0.0]
lock = threading.Lock()


def loop():
    while not stop.is_set():
        t = time.monotonic()
        try:
            c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
            c.request("GET", u.path + ("?" + u.query if u.query else ""))
            r = c.getresponse()
            r.read()
            c.close()
            ok = r.status == 200
        except OSError:
            ok = False
            time.sleep(0.05)
        with lock:
            if ok:
                done[0] += 1
                spent[0] += time.monotonic() - t
            else:
                errors[0] += 1


signal.signal(signal.SIGTERM, lambda *a: stop.set())
threads = [threading.Thread(target=loop, daemon=True) for _ in range(n)]
for t in threads:
    t.start()
while not stop.is_set():
    time.sleep(0.05)
for t in threads:  # let the requests in flight finish, so the next measurement starts clean
    t.join(60)
print("slow requests completed %d, errors %d, mean %.3f s" % (done[0], errors[0], spent[0] / done[0] if done[0] else 0),
      flush=True)
