// C11 threads (<threads.h>) as calls to the pthread functions ThreadSanitizer intercepts.
//
// librdkafka starts its threads with thrd_create and locks with mtx_lock/cnd_wait. glibc (2.34+)
// implements those by calling its internal __pthread_* functions directly, so ThreadSanitizer (whose
// runtime in the Swift 6.3.1 toolchain intercepts pthread_create, pthread_mutex_lock, ... but no C11
// function) never sees librdkafka's threads start: the first malloc on such a thread finds no
// sanitizer state and crashes (SEGV in the allocator cache, "rdk:mock" and "rdk:broker" threads), and
// none of librdkafka's locking would order anything for it.
//
// scripts/sanitizers builds this file into a shared object and preloads it (LD_PRELOAD) into the
// ThreadSanitizer test run only. The executable's interceptors come first in symbol lookup, so each
// pthread_* call below lands in ThreadSanitizer; the behaviour is glibc's own C11 mapping
// (nptl/thrd_create.c, mtx_init.c, cnd_timedwait.c, call_once.c): the same types, the same codes.
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

static int c11_result(int error) {
    switch (error) {
    case 0: return thrd_success;
    case ENOMEM: return thrd_nomem;
    case ETIMEDOUT: return thrd_timedout;
    case EBUSY: return thrd_busy;
    default: return thrd_error;
    }
}

struct c11_start {
    thrd_start_t function;
    void *argument;
};

static void *c11_trampoline(void *context) {
    struct c11_start start = *(struct c11_start *)context;
    free(context);
    return (void *)(intptr_t)start.function(start.argument);
}

int thrd_create(thrd_t *thread, thrd_start_t function, void *argument) {
    struct c11_start *start = malloc(sizeof *start);
    if (start == NULL) return thrd_nomem;
    start->function = function;
    start->argument = argument;
    int error = pthread_create((pthread_t *)thread, NULL, c11_trampoline, start);
    if (error != 0) free(start);
    return c11_result(error);
}

int thrd_join(thrd_t thread, int *result) {
    void *value = NULL;
    int error = pthread_join((pthread_t)thread, &value);
    if (error == 0 && result != NULL) *result = (int)(intptr_t)value;
    return c11_result(error);
}

thrd_t thrd_current(void) { return (thrd_t)pthread_self(); }

int mtx_init(mtx_t *mutex, int type) {
    pthread_mutexattr_t attributes;
    pthread_mutexattr_init(&attributes);
    switch (type) {
    case mtx_plain:
    case mtx_timed:
        pthread_mutexattr_settype(&attributes, PTHREAD_MUTEX_DEFAULT);
        break;
    case mtx_plain | mtx_recursive:
    case mtx_timed | mtx_recursive:
        pthread_mutexattr_settype(&attributes, PTHREAD_MUTEX_RECURSIVE);
        break;
    default:
        pthread_mutexattr_destroy(&attributes);
        return thrd_error;
    }
    int error = pthread_mutex_init((pthread_mutex_t *)mutex, &attributes);
    pthread_mutexattr_destroy(&attributes);
    return c11_result(error);
}

int mtx_lock(mtx_t *mutex) { return c11_result(pthread_mutex_lock((pthread_mutex_t *)mutex)); }
int mtx_trylock(mtx_t *mutex) { return c11_result(pthread_mutex_trylock((pthread_mutex_t *)mutex)); }
int mtx_unlock(mtx_t *mutex) { return c11_result(pthread_mutex_unlock((pthread_mutex_t *)mutex)); }
void mtx_destroy(mtx_t *mutex) { pthread_mutex_destroy((pthread_mutex_t *)mutex); }

int cnd_init(cnd_t *condition) { return c11_result(pthread_cond_init((pthread_cond_t *)condition, NULL)); }
int cnd_signal(cnd_t *condition) { return c11_result(pthread_cond_signal((pthread_cond_t *)condition)); }
int cnd_broadcast(cnd_t *condition) { return c11_result(pthread_cond_broadcast((pthread_cond_t *)condition)); }
void cnd_destroy(cnd_t *condition) { pthread_cond_destroy((pthread_cond_t *)condition); }

int cnd_wait(cnd_t *condition, mtx_t *mutex) {
    return c11_result(pthread_cond_wait((pthread_cond_t *)condition, (pthread_mutex_t *)mutex));
}

int cnd_timedwait(cnd_t *restrict condition, mtx_t *restrict mutex, const struct timespec *restrict deadline) {
    return c11_result(pthread_cond_timedwait((pthread_cond_t *)condition, (pthread_mutex_t *)mutex, deadline));
}

void call_once(once_flag *flag, void (*function)(void)) { pthread_once((pthread_once_t *)&flag->__data, function); }
