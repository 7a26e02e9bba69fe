// Graphviz output: a node per model node and an edge per link, loads on the links of a plan, one
// graph per tree; rendered by `dot` where it is installed.
#include "sumcast/topo/dot.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "sumcast/topo/planner.h"
#include "topology_test_util.h"

namespace sumcast::topo {
namespace {

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = 0; (pos = text.find(needle, pos)) != std::string::npos; pos += needle.size()) ++n;
  return n;
}

// `text` with every occurrence of `part` removed.
std::string without(std::string text, const std::string& part) {
  if (part.empty()) return text;
  for (size_t pos; (pos = text.find(part)) != std::string::npos;) text.erase(pos, part.size());
  return text;
}

TEST(Dot, HostGraphHasEveryNodeAndLinkAndThePlanLoads) {
  auto m = testing::load(testing::kP4d);
  ASSERT_TRUE(m.ok());
  auto res = plan_host(*m, PlanRequest{});
  ASSERT_TRUE(res.ok());
  std::string dot = host_dot(*m, &res->best().plan, &res->best().prediction);
  EXPECT_EQ(dot.rfind("graph host {", 0), 0u);
  EXPECT_EQ(count(dot, "{"), count(dot, "}"));
  for (size_t i = 0; i < m->nodes().size(); ++i) {
    EXPECT_NE(dot.find("  n" + std::to_string(i) + " [label="), std::string::npos) << m->nodes()[i].name;
  }
  EXPECT_EQ(count(dot, " -- "), m->links().size());
  // The graph's label names the topology file, whose path (a checkout under a mktemp directory)
  // may itself hold "MiB": count in the rest.
  EXPECT_GT(count(without(dot, m->source()), "MiB"), 0u) << "loaded links carry their bytes";
  std::string bare = host_dot(*m, nullptr, nullptr);
  EXPECT_NE(bare.find(m->source()), std::string::npos);
  EXPECT_EQ(count(without(bare, m->source()), "MiB"), 0u);
}

TEST(Dot, TreePlanDrawsOneGraphPerTree) {
  auto m = testing::load(testing::kDgx1);
  ASSERT_TRUE(m.ok());
  PlanRequest req;
  req.strategies = {Strategy::kTrees};
  auto res = plan_host(*m, req);
  ASSERT_TRUE(res.ok());
  std::string dot = plan_dot(*m, res->best().plan);
  EXPECT_EQ(count(dot, "subgraph cluster_t"), 8u);
  EXPECT_EQ(count(dot, " -> "), 8u * 7u);
  EXPECT_EQ(count(dot, "label=\"NV"), 8u * 7u) << "every tree edge is an NVLink";
}

TEST(Dot, RendersSvgWhenGraphvizIsInstalled) {
  if (!dot_available()) GTEST_SKIP() << "graphviz `dot` not installed (apt-get install graphviz)";
  auto m = testing::load(testing::kDgx1);
  ASSERT_TRUE(m.ok());
  std::string dir = ::testing::TempDir();
  std::string in = dir + "/topo_dot_test_" + std::to_string(getpid()) + ".dot";
  std::string out = in + ".svg";
  {
    std::ofstream f(in);
    f << host_dot(*m, nullptr, nullptr);
  }
  Status st = render_dot(in, out, "svg");
  ASSERT_TRUE(st.ok()) << st.to_string();
  std::ifstream svg(out);
  std::stringstream ss;
  ss << svg.rdbuf();
  EXPECT_NE(ss.str().find("<svg"), std::string::npos);
  EXPECT_NE(ss.str().find("GPU7"), std::string::npos);
  std::remove(in.c_str());
  std::remove(out.c_str());
  EXPECT_FALSE(render_dot("/nonexistent/in.dot", out, "svg").ok());
}

}  // namespace
}  // namespace sumcast::topo
