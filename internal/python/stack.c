/* stack.c: the default stack size of threads created in this process.
 *
 * Threads that Go creates, and threads the app starts with threading
 * (stack_size 0), take glibc's default pthread attributes: 2 MiB under
 * `ulimit -s unlimited`. Deep C recursion in Python (json, re, pickle of
 * nested data) needs more, so a constructor raises the default to
 * TS_DEFAULT_STACK before any thread exists. Pool threads set their own,
 * larger stack explicitly (pool.c).
 */
#define _GNU_SOURCE
#include <pthread.h>

#define TS_DEFAULT_STACK (8 << 20)

__attribute__((constructor)) static void
ts_set_default_stack(void)
{
    pthread_attr_t attr;
    size_t size = 0;

    if (pthread_getattr_default_np(&attr) != 0) {
        return;
    }
    if (pthread_attr_getstacksize(&attr, &size) == 0 && size < TS_DEFAULT_STACK) {
        (void)pthread_attr_setstacksize(&attr, TS_DEFAULT_STACK);  /* best effort */
        (void)pthread_setattr_default_np(&attr);
    }
    pthread_attr_destroy(&attr);
}
