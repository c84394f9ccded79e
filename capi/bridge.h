/* Internal declarations shared by memtier.c and the Go exports (not installed). */
#ifndef MEMTIER_BRIDGE_H
#define MEMTIER_BRIDGE_H
#include <stddef.h>

/* mt_set_error stores msg[0:n] as the calling thread's last error text. */
void mt_set_error(const char* msg, size_t n);

#endif
