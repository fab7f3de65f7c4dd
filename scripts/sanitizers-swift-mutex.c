// Synchronization.Mutex's contended path, made visible to ThreadSanitizer.
//
// On Linux, Mutex.withLock inlines its fast path (an atomic compare-exchange of the lock word, which
// ThreadSanitizer instruments in the caller) and calls _MutexHandle._lockSlow / _unlockSlow in
// libswiftSynchronization.so when the lock is contended. Those hand the lock over with
// FUTEX_LOCK_PI / FUTEX_UNLOCK_PI: the kernel writes the lock word, so ThreadSanitizer sees a thread
// enter the critical section without acquiring anything and reports every access to the guarded state
// as a race. Four threads appending to one array under one Mutex give "Swift access race" reports
// while the count they keep comes out exact: the reports are false, and they cover every Mutex in
// Fanout (the worker's core, the submission queues, the simulator's state).
//
// These wrappers call the toolchain's own functions and add what ThreadSanitizer misses: an acquire
// of the lock word after the slow path took the lock, a release before the slow path gives it up
// (the fast path's atomics use the same address). scripts/sanitizers builds this file with the
// toolchain's clang (swiftcall) into the object it preloads into the ThreadSanitizer test run only.
// In a process without ThreadSanitizer the weak __tsan_* symbols are absent and nothing is added.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

extern void __tsan_acquire(void *address) __attribute__((weak));
extern void __tsan_release(void *address) __attribute__((weak));

#define SWIFTCALL __attribute__((swiftcall))
#define SWIFT_SELF __attribute__((swift_context))

// Synchronization._MutexHandle._lockSlow(Swift.UInt32) -> ()
#define LOCK_SLOW "$s15Synchronization12_MutexHandleV9_lockSlowyys6UInt32VF"
// Synchronization._MutexHandle._tryLockSlow() -> Swift.Bool
#define TRY_LOCK_SLOW "$s15Synchronization12_MutexHandleV12_tryLockSlowSbyF"
// Synchronization._MutexHandle._unlockSlow() -> ()
#define UNLOCK_SLOW "$s15Synchronization12_MutexHandleV11_unlockSlowyyF"

typedef SWIFTCALL void (*LockSlow)(uint32_t thread, void *SWIFT_SELF handle);
typedef SWIFTCALL bool (*TryLockSlow)(void *SWIFT_SELF handle);
typedef SWIFTCALL void (*UnlockSlow)(void *SWIFT_SELF handle);

static void *toolchain_function(const char *name) {
    void *function = dlsym(RTLD_NEXT, name);
    if (function == NULL) {
        fprintf(stderr, "sanitizers-swift-mutex: %s not found in libswiftSynchronization.so: %s\n", name, dlerror());
        abort();
    }
    return function;
}

SWIFTCALL void mutex_lock_slow(uint32_t thread, void *SWIFT_SELF handle) __asm__(LOCK_SLOW);
SWIFTCALL void mutex_lock_slow(uint32_t thread, void *SWIFT_SELF handle) {
    static LockSlow original;
    if (original == NULL) original = (LockSlow)toolchain_function(LOCK_SLOW);
    original(thread, handle);
    if (__tsan_acquire) __tsan_acquire(handle);
}

SWIFTCALL bool mutex_try_lock_slow(void *SWIFT_SELF handle) __asm__(TRY_LOCK_SLOW);
SWIFTCALL bool mutex_try_lock_slow(void *SWIFT_SELF handle) {
    static TryLockSlow original;
    if (original == NULL) original = (TryLockSlow)toolchain_function(TRY_LOCK_SLOW);
    bool locked = original(handle);
    if (locked && __tsan_acquire) __tsan_acquire(handle);
    return locked;
}

SWIFTCALL void mutex_unlock_slow(void *SWIFT_SELF handle) __asm__(UNLOCK_SLOW);
SWIFTCALL void mutex_unlock_slow(void *SWIFT_SELF handle) {
    static UnlockSlow original;
    if (original == NULL) original = (UnlockSlow)toolchain_function(UNLOCK_SLOW);
    if (__tsan_release) __tsan_release(handle);
    original(handle);
}
