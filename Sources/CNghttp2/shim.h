#include <nghttp2/nghttp2.h>
/* FanoutHTTP2 (the only importer of this module) drives nghttp2 sessions from epoll loops;
   Swift's Glibc module does not export epoll. */
#include <sys/epoll.h>
