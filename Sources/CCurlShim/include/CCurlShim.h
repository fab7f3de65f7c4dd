#ifndef FANOUT_CCURLSHIM_H
#define FANOUT_CCURLSHIM_H
/* Typed wrappers for libcurl's variadic setopt/getinfo, which Swift cannot call. */
#include <curl/curl.h>

CURLcode fanout_curl_easy_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode fanout_curl_easy_setopt_ptr(CURL *handle, CURLoption option, const void *value);
CURLcode fanout_curl_easy_setopt_off(CURL *handle, CURLoption option, curl_off_t value);
CURLcode fanout_curl_easy_setopt_write_cb(CURL *handle, size_t (*cb)(char *, size_t, size_t, void *));
CURLcode fanout_curl_easy_setopt_header_cb(CURL *handle, size_t (*cb)(char *, size_t, size_t, void *));
CURLcode fanout_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode fanout_curl_easy_getinfo_ptr(CURL *handle, CURLINFO info, void **value);
CURLcode fanout_curl_easy_getinfo_double(CURL *handle, CURLINFO info, double *value);
CURLMcode fanout_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value);
CURLMcode fanout_curl_multi_setopt_ptr(CURLM *multi, CURLMoption option, const void *value);
unsigned int fanout_curl_version_num(void);



/* The sockets one multi handle wants watched, as curl_waitfd entries for another multi's
   curl_multi_poll; any descriptor number (no fd_set). Owned by the caller; free it only after
   curl_multi_cleanup of the multi it tracks (libcurl reports sockets closing during cleanup). */
struct fanout_curl_sockets;
struct fanout_curl_sockets *fanout_curl_sockets_new(void);
void fanout_curl_sockets_free(struct fanout_curl_sockets *set);
/* Installs the socket callback that keeps `set` current. */
CURLMcode fanout_curl_multi_track_sockets(CURLM *multi, struct fanout_curl_sockets *set);
/* curl_multi_perform, then reports every transfer's socket changes to the callback. */
CURLMcode fanout_curl_multi_perform_tracking(CURLM *multi, int *running);
/* Copies the watched sockets (at most `capacity`) into `out`; returns how many. */
unsigned int fanout_curl_sockets_copy(const struct fanout_curl_sockets *set, struct curl_waitfd *out, unsigned int capacity);
#endif
