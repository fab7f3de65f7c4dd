#ifndef FANOUT_CLIBFUZZER_H
#define FANOUT_CLIBFUZZER_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's driver (linked by -sanitize=fuzzer): parses the libFuzzer command line in argc/argv
/// and runs `callback` on every input, exactly as libFuzzer's own main does.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
