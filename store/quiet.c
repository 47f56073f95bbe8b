/* store_quiet_begin/end: cubpf's file writes on an application's thread never kill it.
 *
 * A write past RLIMIT_FSIZE raises SIGXFSZ and one into a pipe without reader SIGPIPE, both fatal
 * by default, and the application must not die of cubpf's files (its trace, its module cache).
 * Both signals are blocked around the writes, and taken afterwards when a write raised one that
 * was not pending before; the write itself fails with EFBIG or EPIPE, which the caller reports.
 */
#include <signal.h>
#include <time.h>

#include "store/store.h"

void store_quiet_begin(struct store_quiet *q)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGXFSZ);
	sigaddset(&s, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &s, &q->old);
	sigpending(&q->before);
}

void store_quiet_end(struct store_quiet *q)
{
	static const int sigs[] = {SIGXFSZ, SIGPIPE};
	static const struct timespec now = {0, 0};
	sigset_t pending, one;
	sigpending(&pending);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (sigismember(&pending, sigs[i]) && !sigismember(&q->before, sigs[i]) &&
		    !sigismember(&q->old, sigs[i])) {
			sigemptyset(&one);
			sigaddset(&one, sigs[i]);
			sigtimedwait(&one, NULL, &now);
		}
	pthread_sigmask(SIG_SETMASK, &q->old, NULL);
}
