"""The little Python that turnstile needs, run on the main Python thread.

Loaded from the binary (python/embed.go) as module ``_turnstile_bootstrap``
before the app is imported. It makes the embedded interpreter safe to run
inside a Go process (DESIGN.md, "Embedding pitfalls"):

* Go owns the signals: ``signal.signal`` and ``faulthandler.enable`` become
  calls that log and do nothing.
* ``print``, ``logging`` and ``wsgi.errors`` go to the server's log, line by
  line, never to a block-buffered stdout that loses lines on a crash.
* ``multiprocessing`` starts children with ``forkserver`` (a forked copy of a
  Go process has a dead runtime), from a real ``sys.executable``.
"""

import _thread
import sys

import _turnstile

DEBUG, INFO, WARNING, ERROR = 10, 20, 30, 40


class _LogWriter:
    """What LogStream and LogBuffer share: a write-only, non-seekable,
    non-terminal stream."""

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def isatty(self):
        return False

    def writable(self):
        return True

    def readable(self):
        return False

    def seekable(self):
        return False


class LogBuffer(_LogWriter):
    """The binary side of a LogStream (``sys.stdout.buffer``), for code that
    writes bytes there (``click.echo(b"...")``): UTF-8, undecodable bytes
    written as \\xNN, a character split across writes kept whole."""

    def __init__(self, stream):
        import codecs

        self._stream = stream
        self._decoder = codecs.getincrementaldecoder("utf-8")("backslashreplace")

    def write(self, data):
        if isinstance(data, str):
            raise TypeError("a bytes-like object is required, not 'str'")
        n = len(memoryview(data).cast("B"))
        self._stream.write(self._decoder.decode(bytes(data)))
        return n

    def flush(self):
        self._stream.flush()


class LogStream(_LogWriter):
    """A text stream that writes each complete line as one log record.

    The line not yet ended is kept per thread (keyed by
    ``_thread.get_ident()``): threads write at once (the loops of
    --loops, pool threads, the app's own), ``print`` writes a line's text
    and its newline as two writes, and ``_turnstile.log`` releases the
    GIL, so one shared buffer would join two threads' lines into one
    record and lose others."""

    encoding = "utf-8"
    errors = "backslashreplace"

    def __init__(self, level, name):
        self.level = level
        self.name = name
        self._bufs = {}  # thread ident -> the text after its last newline
        self.buffer = LogBuffer(self)

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        tid = _thread.get_ident()
        buf = self._bufs.pop(tid, "") + text
        lines = ()
        if "\n" in buf:
            *lines, buf = buf.split("\n")
        if buf:
            self._bufs[tid] = buf
        for line in lines:
            _turnstile.log(self.level, line)
        return len(text)

    def flush(self):
        """Write the calling thread's unfinished line as a record."""
        buf = self._bufs.pop(_thread.get_ident(), "")
        if buf:
            _turnstile.log(self.level, buf)

    def _flush_all(self):
        """Write every thread's unfinished line (at close)."""
        while self._bufs:
            try:
                _, buf = self._bufs.popitem()
            except KeyError:
                return
            if buf:
                _turnstile.log(self.level, buf)

    def fileno(self):
        raise OSError("turnstile log stream has no file descriptor")

    def close(self):
        self._flush_all()

    @property
    def closed(self):
        return False


def _inert_signal(signalnum, handler, _real=None):
    import signal as _signal

    _turnstile.log(DEBUG, f"turnstile: ignored signal.signal({signalnum!r}, ...): the server owns signals")
    try:
        return _signal.getsignal(signalnum)
    except Exception:
        return _signal.SIG_DFL


def _inert_faulthandler_enable(*args, **kwargs):
    _turnstile.log(DEBUG, "turnstile: ignored faulthandler.enable(): the server owns SIGSEGV")


class _EmbeddedFinder:
    """Serves the Python that ships inside the binary as the ``turnstile``
    package: ``turnstile.channels`` (python/turnstile/channels.py, the
    source in ``_turnstile_layer.source``). Only those two names; a
    ``turnstile`` on sys.path is shadowed for them."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in ("turnstile", "turnstile.channels"):
            return None
        import importlib.machinery

        return importlib.machinery.ModuleSpec(fullname, self, is_package=(fullname == "turnstile"))

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        if module.__name__ == "turnstile":
            module.__path__ = []
            return
        import _turnstile_layer

        module.__file__ = "<turnstile>/turnstile/channels.py"
        exec(compile(_turnstile_layer.source, module.__file__, "exec"), module.__dict__)


def setup(app_dir, switch_interval, workers, log_config="", log_config_kind=""):
    """Prepare the interpreter; called once before the app is imported."""
    global _workers
    _workers = workers
    sys.stdout = LogStream(INFO, "stdout")
    sys.stderr = LogStream(ERROR, "stderr")
    global wsgi_errors
    wsgi_errors = LogStream(ERROR, "wsgi.errors")
    if app_dir and app_dir not in sys.path:
        sys.path.insert(0, app_dir)
    if switch_interval and switch_interval > 0:
        sys.setswitchinterval(switch_interval)

    # The first thread to import threading becomes threading.main_thread()
    # (3.11, 3.12): import it here, on the main Python thread.
    import threading  # noqa: F401

    import signal
    import faulthandler

    signal.signal = _inert_signal
    faulthandler.enable = _inert_faulthandler_enable

    # logging handlers that write to our stderr keep the record's level and
    # send a multi-line record as one record: the formatted message in
    # msg, the record's logger name in logger and its exc_info (with
    # stack_info) in traceback, as the server's own "app raised" records
    # carry theirs (logger.exception, Flask's 500 handler).
    import logging

    plain_emit = logging.StreamHandler.emit

    def emit(self, record):
        if isinstance(self.stream, LogStream):
            try:
                text, tb = format_apart(self, record)
            except Exception:
                self.handleError(record)
                return
            try:
                if tb:
                    _turnstile.log(record.levelno, text, source="python", logger=str(record.name), traceback=tb)
                else:
                    _turnstile.log(record.levelno, text, source="python", logger=str(record.name))
            except Exception:
                self.handleError(record)
        else:
            plain_emit(self, record)

    def format_apart(handler, record):
        """The handler's text of record without its exception and stack,
        and those as Python's traceback text ("" when none)."""
        exc_info, exc_text, stack_info = record.exc_info, record.exc_text, record.stack_info
        if not exc_info and not exc_text and not stack_info:
            return handler.format(record), ""
        fmt = handler.formatter or logging._defaultFormatter
        parts = []
        if exc_info:
            parts.append(fmt.formatException(exc_info))
        elif exc_text:
            parts.append(exc_text)
        if stack_info:
            parts.append(fmt.formatStack(stack_info))
        record.exc_info = record.exc_text = record.stack_info = None
        try:
            text = handler.format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = exc_info, exc_text, stack_info
        return text, "\n".join(p.rstrip("\n") for p in parts if p)

    logging.StreamHandler.emit = emit
    if log_config:
        # After the emit above: a handler the file sends to sys.stderr or
        # sys.stdout (ext://sys.stderr, a StreamHandler's default) writes
        # to a LogStream, so its formatted text becomes a record.
        apply_log_config(log_config, log_config_kind)

    # A warning (warnings.warn: a framework's DeprecationWarning, a
    # RuntimeWarning) is logged at WARNING as one record; printed to stderr
    # it was an ERROR record per line. Only where it would have reached our
    # stderr: a warning for a file of the app's own (or a redirected
    # sys.stderr), an app's own showwarning, or logging.captureWarnings is
    # left alone. The hook is warnings' _showwarnmsg_impl (3.6-3.13), the
    # one that has the whole message (with tracemalloc, where a
    # ResourceWarning's object was allocated), not showwarning.
    import warnings

    plain_impl = getattr(warnings, "_showwarnmsg_impl", None)
    formatmsg = getattr(warnings, "_formatwarnmsg", None)
    if plain_impl is not None and formatmsg is not None:

        def showwarnmsg_impl(msg):
            if not isinstance(msg.file if msg.file is not None else sys.stderr, LogStream):
                plain_impl(msg)
                return
            try:
                text = formatmsg(msg)
            except Exception:
                text = "%s: %s" % (getattr(msg.category, "__name__", "Warning"), msg.message)
            _turnstile.log(WARNING, text.rstrip("\n"))

        warnings._showwarnmsg_impl = showwarnmsg_impl

    sys.meta_path.insert(0, _EmbeddedFinder())

    import multiprocessing

    try:
        multiprocessing.set_start_method("forkserver", force=True)
    except ValueError:
        multiprocessing.set_start_method("spawn", force=True)


def apply_log_config(path, kind):
    """Apply --log-config: a logging.config.dictConfig dictionary from a
    JSON or YAML file (kind "json", "yaml"), or an .ini file for
    logging.config.fileConfig (kind "ini"), as gunicorn's --log-config-json
    and --log-config do (fileConfig with disable_existing_loggers=False, as
    gunicorn calls it). A failure is an AppLoadError naming the file."""
    import logging.config

    try:
        if kind == "ini":
            logging.config.fileConfig(path, disable_existing_loggers=False)
            return
        with open(path, encoding="utf-8") as f:
            if kind == "yaml":
                try:
                    import yaml
                except ImportError:
                    raise AppLoadError(
                        f"--log-config {path}: a YAML file needs PyYAML, which the app's Python cannot import"
                        " (pip install PyYAML, or write the dictionary as .json)"
                    ) from None
                conf = yaml.safe_load(f)
            else:
                import json

                conf = json.load(f)
        logging.config.dictConfig(conf)
    except AppLoadError:
        raise
    except Exception as exc:
        text = str(exc)
        if exc.__cause__ is not None:  # dictConfig's "Unable to configure handler 'x'"
            text += f" ({type(exc.__cause__).__name__}: {exc.__cause__})"
        text = text.replace("\n", " ")
        raise AppLoadError(f"--log-config {path}: {type(exc).__name__}: {text}") from None


def format_exception(exc):
    if isinstance(exc, AppLoadError):
        return f"turnstile: {exc}"
    import traceback

    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip("\n")


class AppLoadError(Exception):
    """A clear one-line reason the app could not be loaded."""


def _is_asgi(app):
    import inspect

    if inspect.iscoroutinefunction(app):
        return True
    call = getattr(app, "__call__", None)
    if call is not None and inspect.iscoroutinefunction(call):
        return True
    return False


def load_app(spec, factory, interface):
    """Import MODULE:ATTR and return (app, "wsgi" | "asgi")."""
    import importlib

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise AppLoadError(f"app spec {spec!r} is not MODULE:ATTR")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name or (exc.name and module_name.startswith(exc.name + ".")):
            raise AppLoadError(f"no module named {exc.name!r} (sys.path: {sys.path[:3]}...)") from None
        raise
    app = module
    for part in attr.split("."):
        try:
            app = getattr(app, part)
        except AttributeError:
            raise AppLoadError(f"module {module_name!r} has no attribute {attr!r}") from None
    if factory:
        app = app()
    if not callable(app):
        raise AppLoadError(f"{spec} is not callable (got {type(app).__name__})")
    if interface == "auto":
        interface = "asgi" if _is_asgi(app) else "wsgi"
    if interface == "asgi":
        import inspect

        if inspect.isclass(app) and not hasattr(app, "__await__"):
            app = _asgi2(app)  # a class is ASGI 2 (uvicorn's rule): App(scope), then (receive, send)
    return app, interface


def _asgi2(cls):
    """The ASGI 3 callable for an ASGI 2 application class: instantiated
    with the scope, the instance awaited with receive and send."""

    async def asgi3(scope, receive, send):
        await cls(scope)(receive, send)

    asgi3.__qualname__ = asgi3.__name__ = getattr(cls, "__qualname__", "asgi2")
    return asgi3


def shutdown():
    """Run atexit handlers and logging.shutdown(), flush stdio."""
    import atexit

    try:
        atexit._run_exitfuncs()
    finally:
        if "logging" in sys.modules:
            sys.modules["logging"].shutdown()
        for stream in (sys.stdout, sys.stderr):
            try:
                getattr(stream, "_flush_all", stream.flush)()  # every thread's unfinished line
            except Exception:
                pass
