/* gilstate.c: is the GIL held right now? Read without taking it.
 *
 * The pool wakes an idle thread for a new job only when that thread could
 * run: when the GIL is free. A thread woken while another holds the GIL
 * just sleeps again on the GIL's condition variable, and on a small
 * machine those wake-ups and context switches cost more than the job (a
 * perf profile of the hello app at saturation showed 54% of the cycles in
 * the scheduler's task switch before this). The flag lives in CPython's
 * private GIL state (3.11: _PyRuntime.ceval.gil; 3.12+: the main
 * interpreter's ceval.gil), so this file builds with Py_BUILD_CORE.
 */
#define Py_BUILD_CORE 1
#include "tspy.h"
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"

/* ts_gil_locked returns 1 when some thread holds the GIL, 0 when it is
 * free. A racy snapshot, from any thread, no GIL. */
int
ts_gil_locked(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    struct _gil_runtime_state *gil = PyInterpreterState_Main()->ceval.gil;
    return gil != NULL && __atomic_load_n(&gil->locked, __ATOMIC_RELAXED) > 0;
#elif PY_VERSION_HEX >= 0x030C0000
    struct _gil_runtime_state *gil = PyInterpreterState_Main()->ceval.gil;
    return gil != NULL && _Py_atomic_load_relaxed(&gil->locked) > 0;
#else
    return _Py_atomic_load_relaxed(&_PyRuntime.ceval.gil.locked) > 0;
#endif
}
