from djust import LiveView, event_handler


class CounterView(LiveView):
    template = """
    <div dj-root>
        <h1>Count: {{ count }}</h1>
        <p>Ticks: {{ ticks }}</p>
        <button dj-click="increment">+</button>
    </div>
    """
    tick_interval = 300  # ms: the server pushes a render on its own

    def mount(self, request, **kwargs):
        self.count = 0
        self.ticks = 0

    @event_handler
    def increment(self, **kwargs):
        self.count += 1

    def handle_tick(self):
        self.ticks += 1
