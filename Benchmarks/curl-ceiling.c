/* The ceiling of libcurl itself: one thread driving curl multi the way APNsClient does
 * (HTTP/2 over TLS, one connection per multi, N streams, reused easy handles, POST of a small
 * JSON body with APNs-like headers). Build: cc -O2 -o curl-ceiling curl-ceiling.c -lcurl
 * Usage: curl-ceiling URL CAFILE REQUESTS STREAMS [AUTHORIZATION-HEADER-LINE] */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t discard(char *p, size_t s, size_t n, void *u) { (void)p; (void)u; return s * n; }

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: %s URL CAFILE REQUESTS STREAMS\n", argv[0]); return 64; }
    const char *url = argv[1], *ca = argv[2];
    long total = atol(argv[3]), streams = atol(argv[4]);
    const char *body = "{\"aps\":{\"event\":\"update\",\"timestamp\":1700000000,\"content-state\":{\"progress\":0.5}}}";
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, 1L);
    curl_multi_setopt(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, streams);
    struct curl_slist *headers = NULL;
    headers = curl_slist_append(headers, argc > 5 ? argv[5] : "authorization: bearer eyJhbGciOiJFUzI1NiIsImtpZCI6IktFWTEyMzQ1NjcifQ.x.y");
    headers = curl_slist_append(headers, "apns-push-type: liveactivity");
    headers = curl_slist_append(headers, "apns-topic: com.example.bench.push-type.liveactivity");
    headers = curl_slist_append(headers, "apns-priority: 5");
    headers = curl_slist_append(headers, "content-type: application/json");
    headers = curl_slist_append(headers, "accept:");
    CURL **easy = calloc(streams, sizeof(CURL *));
    for (long i = 0; i < streams; i++) {
        easy[i] = curl_easy_init();
        curl_easy_setopt(easy[i], CURLOPT_URL, url);
        curl_easy_setopt(easy[i], CURLOPT_CAINFO, ca);
        curl_easy_setopt(easy[i], CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS);
        curl_easy_setopt(easy[i], CURLOPT_PIPEWAIT, 1L);
        curl_easy_setopt(easy[i], CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(easy[i], CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(easy[i], CURLOPT_POSTFIELDSIZE, (long)strlen(body));
        curl_easy_setopt(easy[i], CURLOPT_WRITEFUNCTION, discard);
    }
    /* Warm up: one request alone (the connection and its auth), as APNs wants. */
    curl_multi_add_handle(multi, easy[0]);
    int running = 1;
    while (running) { curl_multi_perform(multi, &running); if (running) curl_multi_poll(multi, NULL, 0, 1000, NULL); }
    CURLMsg *m; int q;
    while ((m = curl_multi_info_read(multi, &q))) curl_multi_remove_handle(multi, m->easy_handle);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long started = 0, done = 0, failed = 0;
    for (long i = 0; i < streams && started < total; i++, started++) curl_multi_add_handle(multi, easy[i]);
    while (done < total) {
        curl_multi_perform(multi, &running);
        while ((m = curl_multi_info_read(multi, &q))) {
            if (m->msg != CURLMSG_DONE) continue;
            long code = 0;
            curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &code);
            if (m->data.result != CURLE_OK || code != 200) failed++;
            done++;
            curl_multi_remove_handle(multi, m->easy_handle);
            if (started < total) { curl_multi_add_handle(multi, m->easy_handle); started++; }
        }
        if (done < total) curl_multi_poll(multi, NULL, 0, 1000, NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double seconds = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("curl-ceiling: %ld requests, %ld failed, %.2f s, %.0f requests/s (streams=%ld)\n", total, failed, seconds, total / seconds, streams);
    return 0;
}
