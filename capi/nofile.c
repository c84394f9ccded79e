/* The soft RLIMIT_NOFILE as the host had it when the library was loaded.
 *
 * Go's syscall package raises the soft open-file limit to hard - 1 in its init
 * (Go 1.19+, golang/go#46279; $GOROOT/src/syscall/rlimit.go) and restores it
 * only for children it starts itself through os/exec. In a c-shared library
 * that init runs inside the host process, so every child the host forks and
 * execs afterwards (DataLoader workers, subprocess, decoders) would inherit the
 * raised limit (field case N04, tests/field_cases.md). This constructor records the limit before
 * the Go runtime starts: priority 101 runs before the default-priority
 * constructor that starts it (.init_array.00101 sorts before .init_array), on
 * the loading thread, so the record is the host's value. nofile.go puts it
 * back once Go's init has run. */
#include <stdint.h>
#include <sys/resource.h>

static struct rlimit mt_nofile_at_load;
static int mt_nofile_recorded;

__attribute__((constructor(101))) static void mt_record_nofile(void) {
    if (getrlimit(RLIMIT_NOFILE, &mt_nofile_at_load) == 0) mt_nofile_recorded = 1;
}

/* mt_nofile_at_load_get stores the recorded limit and returns 1, or returns 0
 * when getrlimit failed at load. Hidden: not part of the library's ABI. */
__attribute__((visibility("hidden"))) int mt_nofile_at_load_get(uint64_t* cur, uint64_t* max) {
    if (!mt_nofile_recorded) return 0;
    *cur = (uint64_t)mt_nofile_at_load.rlim_cur;
    *max = (uint64_t)mt_nofile_at_load.rlim_max;
    return 1;
}
