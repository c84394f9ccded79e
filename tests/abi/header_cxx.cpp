/*
 * Description: memtier.h compiles alone as C++11 (-std=c++11 -pedantic -Wall
 * -Wextra -Werror) with C linkage, and its functions link and run from C++.
 */
#include "memtier.h"

#include <cstdio>
#include <cstring>
#include <type_traits>

static_assert(MEMTIER_OK == 0 && MEMTIER_ERR_DIRECT_IO == -15, "status values are pinned");
static_assert(std::is_standard_layout<memtier_config_t>::value, "config is a C struct");
static_assert(std::is_standard_layout<memtier_stats_t>::value, "stats is a C struct");
static_assert(sizeof(memtier_iovec_t) == 40, "iovec is an array element of fixed size");

int main() {
    memtier_config_t cfg;
    std::memset(&cfg, 0, sizeof cfg);
    if (memtier_config_default(&cfg) != MEMTIER_OK || cfg.struct_size != sizeof cfg) {
        std::fprintf(stderr, "FAIL: memtier_config_default from C++: struct_size %u\n",
                     cfg.struct_size);
        return 1;
    }
    if (std::strcmp(memtier_strerror(MEMTIER_OK), "") == 0 ||
        std::strcmp(memtier_version(), MEMTIER_VERSION_STRING) != 0) {
        std::fprintf(stderr, "FAIL: strerror/version from C++\n");
        return 1;
    }
    std::printf("header_cxx: OK (%s)\n", memtier_version());
    return 0;
}
