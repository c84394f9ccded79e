/*
 * Description: the hand-written memtier.h and the header cgo generates for the
 * Go exports (libmemtier.h, build dir, never installed) compile together in one
 * translation unit with -Werror, so a Go //export whose C prototype differs
 * from memtier.h fails here instead of drifting silently.
 */
#define MEMTIER_TESTING_API /* memtier_debug_hook */
#include "memtier.h"
#include "libmemtier.h"

typedef void (*any_fn)(void);

int main(void) {
    /* Take the address of every public function so each declaration is used. */
    any_fn fns[] = {
        (any_fn)memtier_strerror,        (any_fn)memtier_last_error,
        (any_fn)memtier_version,         (any_fn)memtier_version_number,
        (any_fn)memtier_config_default,  (any_fn)memtier_init,
        (any_fn)memtier_finalize,        (any_fn)memtier_get_config,
        (any_fn)memtier_memory_limit,
        (any_fn)memtier_read,            (any_fn)memtier_read_ex,
        (any_fn)memtier_readv,           (any_fn)memtier_readv_ex,
        (any_fn)memtier_prefetch,
        (any_fn)memtier_prefetch_async,  (any_fn)memtier_read_async,
        (any_fn)memtier_request_wait,    (any_fn)memtier_request_test,
        (any_fn)memtier_request_release, (any_fn)memtier_drop_cache,
        (any_fn)memtier_interrupt,       (any_fn)memtier_set_interrupt_check,
        (any_fn)memtier_explain,         (any_fn)memtier_path_name,
        (any_fn)memtier_stats,           (any_fn)memtier_stats_sized,
        (any_fn)memtier_stats_reset,     (any_fn)memtier_debug_hook,
    };
    size_t i;
    for (i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        if (fns[i] == 0) return 1;
    }
    return 0;
}
