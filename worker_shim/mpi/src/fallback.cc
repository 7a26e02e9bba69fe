#include "sumcast/mpi/fallback.h"

namespace sumcast::mpi {

std::array<long long, 2> fallback_key(uint64_t calls_done, int rank, int size) {
  const auto done = static_cast<long long>(calls_done);
  return {done * size + (size - 1 - rank), -done};
}

FallbackRoles fallback_roles(const std::array<long long, 2>& max_keys, uint64_t calls_done, int size) {
  FallbackRoles r;
  if (size < 1 || max_keys[0] < 0 || max_keys[1] > 0) return r;
  const long long most = max_keys[0] / size, least = -max_keys[1];
  const auto done = static_cast<long long>(calls_done);
  if (least > most || most - least > 1 || done < least || done > most) return r;
  r.valid = true;
  r.least = static_cast<uint64_t>(least);
  r.most = static_cast<uint64_t>(most);
  r.root = static_cast<int>(size - 1 - max_keys[0] % size);
  r.behind = done < most;
  return r;
}

}  // namespace sumcast::mpi
