// The declaration in include/CLibFuzzer.h is the whole module; libFuzzer itself provides the symbol.
#include "CLibFuzzer.h"
