#include "CCurlShim.h"

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

unsigned int fanout_curl_multi_waitfds(CURLM *multi, struct curl_waitfd *out, unsigned int capacity) {
    fd_set readable, writable, failed;
    int maxfd = -1;
    FD_ZERO(&readable);
    FD_ZERO(&writable);
    FD_ZERO(&failed);
    if (curl_multi_fdset(multi, &readable, &writable, &failed, &maxfd) != CURLM_OK) return 0;
    unsigned int count = 0;
    for (int fd = 0; fd <= maxfd && count < capacity; fd++) {
        short events = 0;
        if (FD_ISSET(fd, &readable)) events |= CURL_WAIT_POLLIN;
        if (FD_ISSET(fd, &writable)) events |= CURL_WAIT_POLLOUT;
        if (FD_ISSET(fd, &failed)) events |= CURL_WAIT_POLLPRI;
        if (events) {
            out[count].fd = fd;
            out[count].events = events;
            out[count].revents = 0;
            count++;
        }
    }
    return count;
}
