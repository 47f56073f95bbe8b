/* threadhist_entry: threadhist counting each thread at its kernel's entry, what
 * `cubpf run --sanitizer -t threadhist` loads (threadhist.bpf.c says why). */
#define TH_AT_ENTRY 1
#include "threadhist.bpf.c"
