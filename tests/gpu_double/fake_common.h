/* TEST DOUBLE: NOT NVIDIA's libcuda / libcufile, and never installed or shipped.
 *
 * Helpers both MemTier test doubles (fake_cuda.c, fake_cufile.c) use in the
 * same way: the export marker, the environment switches and the named
 * counters. Header only, so each double keeps its own private copy and
 * neither exports them.
 */
#ifndef MEMTIER_FAKE_COMMON_H
#define MEMTIER_FAKE_COMMON_H

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The libraries build with hidden visibility; only the API they stand in for
 * and their test hooks are exported. */
#define EXPORT __attribute__((visibility("default")))

/* A numeric switch (README.md), read at each call so a test can change it
 * between calls: def when unset, empty or not wholly a number (strtol base
 * 0, so 0x... works). */
static inline long env_long(const char *name, long def) {
  const char *v = getenv(name);
  if (!v || !*v) return def;
  char *end;
  long x = strtol(v, &end, 0);
  return *end ? def : x;
}

/* Counters: a double lists its counter names in an X-macro, STATS(X), and
 * FAKE_STATS(STATS) declares their indexes S_<name>, their number S_COUNT and
 * stat_names[], which the fake_*_stat hook matches names against. */
#define FAKE_STAT_INDEX(n) S_##n,
#define FAKE_STAT_NAME(n) #n,
#define FAKE_STATS(LIST)                                  \
  enum { LIST(FAKE_STAT_INDEX) S_COUNT };                 \
  static const char *const stat_names[] = {LIST(FAKE_STAT_NAME)}

/* The fake_*_stat hook: the counter called name (names as in FAKE_STATS),
 * read under mu, the lock that guards stats; -1 when there is none. */
static inline long long stat_lookup(pthread_mutex_t *mu, const long long *stats, const char *const *names,
                                    int n, const char *name) {
  long long v = -1;
  pthread_mutex_lock(mu);
  for (int i = 0; i < n; i++)
    if (strcmp(names[i], name) == 0) v = stats[i];
  pthread_mutex_unlock(mu);
  return v;
}

#endif /* MEMTIER_FAKE_COMMON_H */
