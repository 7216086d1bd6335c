import threading

from djust import LiveView, event_handler


def where():
    """The thread running this sync code: its Python name, then its OS name
    (turnstile's pool threads are ts-http-N / ts-sess-N to the OS; Python
    threads keep their creator's OS name)."""
    try:
        with open("/proc/self/task/%d/comm" % threading.get_native_id()) as f:
            comm = f.read().strip()
    except OSError:
        comm = "?"
    return threading.current_thread().name + "/" + comm


class CounterView(LiveView):
    template = """
    <div dj-root>
        <h1>Count: {{ count }}</h1>
        <p>Ticks: {{ ticks }}</p>
        <p>Thread: {{ thread }}</p>
        <button dj-click="increment">+</button>
    </div>
    """
    tick_interval = 300  # ms: the server pushes a render on its own

    def mount(self, request, **kwargs):
        self.count = 0
        self.ticks = 0
        self.thread = where()

    @event_handler
    def increment(self, **kwargs):
        self.count += 1

    def handle_tick(self):
        self.ticks += 1
