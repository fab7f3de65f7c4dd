#include "CCurlShim.h"
#include <stdlib.h>

CURLcode fanout_curl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
CURLcode fanout_curl_easy_setopt_ptr(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}
CURLcode fanout_curl_easy_setopt_off(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}
CURLcode fanout_curl_easy_setopt_write_cb(CURL *handle, size_t (*cb)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, cb);
}
CURLcode fanout_curl_easy_setopt_header_cb(CURL *handle, size_t (*cb)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, cb);
}
CURLcode fanout_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}
CURLcode fanout_curl_easy_getinfo_ptr(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}
CURLcode fanout_curl_easy_getinfo_double(CURL *handle, CURLINFO info, double *value) {
    return curl_easy_getinfo(handle, info, value);
}
CURLMcode fanout_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}
CURLMcode fanout_curl_multi_setopt_ptr(CURLM *multi, CURLMoption option, const void *value) {
    return curl_multi_setopt(multi, option, value);
}
unsigned int fanout_curl_version_num(void) {
    return curl_version_info(CURLVERSION_NOW)->version_num;
}

/* The sockets one multi handle wants watched, kept up to date by libcurl's socket callback. Unlike
   curl_multi_fdset (fd_set, FD_SETSIZE = 1024), this holds any descriptor number. */
struct fanout_curl_sockets {
    struct curl_waitfd *entries;
    unsigned int count;
    unsigned int capacity;
};

static int fanout_curl_socket_changed(CURL *easy, curl_socket_t socket, int what, void *context, void *socketp) {
    (void)easy;
    (void)socketp;
    struct fanout_curl_sockets *set = context;
    unsigned int index = 0;
    while (index < set->count && set->entries[index].fd != socket) index++;
    if (what == CURL_POLL_REMOVE) {
        if (index < set->count) set->entries[index] = set->entries[--set->count];
        return 0;
    }
    short events = 0;
    if (what & CURL_POLL_IN) events |= CURL_WAIT_POLLIN;
    if (what & CURL_POLL_OUT) events |= CURL_WAIT_POLLOUT;
    if (index == set->count) {
        if (set->count == set->capacity) {
            unsigned int capacity = set->capacity ? set->capacity * 2 : 4;
            struct curl_waitfd *grown = realloc(set->entries, capacity * sizeof *grown);
            if (!grown) return -1; /* libcurl fails the transfers on this multi: loud, never a silent stall */
            set->entries = grown;
            set->capacity = capacity;
        }
        set->count++;
    }
    set->entries[index].fd = socket;
    set->entries[index].events = events;
    set->entries[index].revents = 0;
    return 0;
}

struct fanout_curl_sockets *fanout_curl_sockets_new(void) {
    return calloc(1, sizeof(struct fanout_curl_sockets));
}

void fanout_curl_sockets_free(struct fanout_curl_sockets *set) {
    if (!set) return;
    free(set->entries);
    free(set);
}

CURLMcode fanout_curl_multi_track_sockets(CURLM *multi, struct fanout_curl_sockets *set) {
    CURLMcode code = curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, set);
    if (code != CURLM_OK) return code;
    return curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, fanout_curl_socket_changed);
}

/* curl_multi_perform does not report socket changes to the socket callback; curl_multi_socket_all is
   curl_multi_perform followed by exactly that for every transfer. It is marked deprecated (in favour of
   curl_multi_socket_action, which would mean driving each socket from its own events), but is still
   part of libcurl's API. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
CURLMcode fanout_curl_multi_perform_tracking(CURLM *multi, int *running) {
    return curl_multi_socket_all(multi, running);
}
#pragma GCC diagnostic pop

unsigned int fanout_curl_sockets_copy(const struct fanout_curl_sockets *set, struct curl_waitfd *out, unsigned int capacity) {
    unsigned int count = 0;
    for (unsigned int index = 0; index < set->count && count < capacity; index++) {
        if (!set->entries[index].events) continue;
        out[count] = set->entries[index];
        out[count].revents = 0;
        count++;
    }
    return count;
}
