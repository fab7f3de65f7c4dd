// glibc's allocator controls (mallopt, malloc_trim, mallinfo2): part of libc, nothing to link.
#include <malloc.h>
