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



/* The sockets `multi` wants watched, as curl_waitfd entries for another multi's curl_multi_poll.
   Returns how many were written (at most `capacity`). */
unsigned int fanout_curl_multi_waitfds(CURLM *multi, struct curl_waitfd *out, unsigned int capacity);
#endif
