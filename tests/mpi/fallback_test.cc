// The interposer's recovery arithmetic after every appliance was lost (sumcast/mpi/fallback.h):
// the ranks' keys all-reduced with MAX as PMPI_Allreduce would, then each rank's roles.
#include "sumcast/mpi/fallback.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace sumcast::mpi {
namespace {

std::vector<FallbackRoles> meet(const std::vector<uint64_t>& done) {
  const int size = static_cast<int>(done.size());
  std::array<long long, 2> max = fallback_key(done[0], 0, size);
  for (int r = 1; r < size; ++r) {
    const auto k = fallback_key(done[static_cast<size_t>(r)], r, size);
    max = {std::max(max[0], k[0]), std::max(max[1], k[1])};
  }
  std::vector<FallbackRoles> out;
  for (int r = 0; r < size; ++r) out.push_back(fallback_roles(max, done[static_cast<size_t>(r)], size));
  return out;
}

TEST(Fallback, RanksInTheSameCallAllRunItThroughMpi) {
  for (const auto& roles : meet({7, 7, 7, 7})) {
    EXPECT_TRUE(roles.valid);
    EXPECT_EQ(roles.least, 7u);
    EXPECT_EQ(roles.most, 7u);
    EXPECT_FALSE(roles.behind);
    EXPECT_EQ(roles.root, 0);
  }
}

TEST(Fallback, TheRanksBehindGetTheResultFromTheLowestRankAhead) {
  const auto roles = meet({4, 5, 4, 5, 5});
  for (size_t r = 0; r < roles.size(); ++r) {
    EXPECT_TRUE(roles[r].valid) << r;
    EXPECT_EQ(roles[r].least, 4u);
    EXPECT_EQ(roles[r].most, 5u);
    EXPECT_EQ(roles[r].root, 1) << "the lowest rank that completed call 4";
    EXPECT_EQ(roles[r].behind, r == 0 || r == 2) << r;
  }
}

TEST(Fallback, MoreThanOneCallApartIsRefused) {
  for (const auto& roles : meet({3, 5, 4})) EXPECT_FALSE(roles.valid);
}

TEST(Fallback, LargeCountsAndOneRankAhead) {
  const uint64_t big = uint64_t{1} << 40;
  const auto roles = meet({big, big, big + 1});
  EXPECT_TRUE(roles[0].behind && roles[1].behind && !roles[2].behind);
  EXPECT_EQ(roles[0].root, 2);
  EXPECT_EQ(roles[2].most, big + 1);
}

}  // namespace
}  // namespace sumcast::mpi
