// Text views: the nvidia-smi-style matrix agrees with relation(), the host summary names switches,
// NICs and assumptions, the plan lists every loaded resource and the reason it won.
#include "sumcast/topo/report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "topology_test_util.h"

namespace sumcast::topo {
namespace {

std::vector<std::vector<std::string>> rows_of(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.rfind("Legend", 0) == 0) break;
    std::istringstream ls(line);
    std::vector<std::string> tok;
    for (std::string t; ls >> t;) tok.push_back(t);
    rows.push_back(tok);
  }
  return rows;
}

TEST(Report, MatrixShowsEveryGpuAndNicWithTheirRelations) {
  auto m = testing::load(testing::kDgx1);
  ASSERT_TRUE(m.ok());
  Router r(*m);
  auto rows = rows_of(format_topo_matrix(r));
  std::vector<int> devs = m->gpus();
  devs.insert(devs.end(), m->nics().begin(), m->nics().end());
  ASSERT_EQ(rows.size(), devs.size() + 1);
  ASSERT_EQ(rows[0].size(), devs.size() + 1);  // names + "NUMA"
  for (size_t i = 0; i < devs.size(); ++i) {
    EXPECT_EQ(rows[0][i], m->node(devs[i]).name);
    ASSERT_EQ(rows[i + 1].size(), devs.size() + 2);
    EXPECT_EQ(rows[i + 1][0], m->node(devs[i]).name);
    for (size_t j = 0; j < devs.size(); ++j) EXPECT_EQ(rows[i + 1][j + 1], relation(r, devs[i], devs[j]));
    EXPECT_EQ(rows[i + 1].back(), m->node(m->node(devs[i]).numa).name);
  }
}

TEST(Report, SummaryNamesSwitchesNicsAndAssumptions) {
  auto m = testing::load(testing::kP4d);
  ASSERT_TRUE(m.ok());
  std::string s = format_host_summary(*m);
  for (int sw : {1, 2, 3, 4})
    EXPECT_NE(s.find("switch SW ffff:ff:0" + std::to_string(sw) + ".0"), std::string::npos) << s;
  for (int c : m->nics()) EXPECT_NE(s.find("NIC " + m->node(c).name), std::string::npos);
  EXPECT_NE(s.find("Assumptions:"), std::string::npos);
  for (const std::string& a : m->assumptions()) EXPECT_NE(s.find(a), std::string::npos);
}

TEST(Report, PlanListsEveryLoadedResourceAndWhy) {
  auto m = testing::load(testing::kDgx1);
  ASSERT_TRUE(m.ok());
  auto res = plan_host(*m, PlanRequest{});
  ASSERT_TRUE(res.ok());
  const Candidate& c = res->best();
  std::string text = format_plan(*m, *res, c, true);
  EXPECT_NE(text.find("Why: " + res->why), std::string::npos);
  for (const ResourceLoad& r : c.prediction.resources) EXPECT_NE(text.find(r.name), std::string::npos) << r.name;
  size_t steps = 0;
  for (const Stage& st : c.plan.stages) steps += st.steps.size();
  size_t printed = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    for (const char* op : {"       copy ", "       reduce ", "       exchange "}) printed += line.rfind(op, 0) == 0;
  }
  EXPECT_EQ(printed, steps) << "one line per step with --steps";
  std::string cands = format_candidates(*res);
  EXPECT_EQ(std::count(cands.begin(), cands.end(), '*'), 1);
}

}  // namespace
}  // namespace sumcast::topo
